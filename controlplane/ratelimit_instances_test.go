package controlplane_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// TestRateLimitsPerInstance defends what docs/operations.md says of two
// control planes on one Postgres: the sign-in limit is kept per instance,
// so with two the effective burst is twice the configured one (and a
// third attempt burst is refused by both). A user signed up through one
// instance signs in through the other.
func TestRateLimitsPerInstance(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Pool(t)
	mailer, mailDir := cptest.Mailer(t)
	const burst = 3
	var urls []string
	for i := 0; i < 2; i++ {
		srv, err := controlplane.New(controlplane.Config{DB: db, Mailer: mailer, LoginBurst: burst})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	id, secret, err := controlplane.CreateOperatorKey(ctx, db, "rate limit test")
	if err != nil {
		t.Fatal(err)
	}
	cptest.SeedFleet(t, client.New(urls[1], client.WithAPIKey(id, secret)), cptest.TestAddrs)
	req := api.SignupRequest{TenantName: "twice", Email: "ops@twice.test", Password: "password-twice-1"}
	if _, err := cptest.SignUp(ctx, client.New(urls[0]), mailDir, req); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(urls[1]).Login(ctx, api.SessionRequest{Email: req.Email, Password: req.Password}); err != nil {
		t.Fatalf("sign in through the other instance: %v", err)
	}
	wrong := api.SessionRequest{Email: req.Email, Password: "wrong password 1"}
	for i, u := range urls {
		n := burst
		if i == 1 {
			n = burst - 1 // the right sign-in above took one
		}
		for a := 0; a < n; a++ {
			if _, err := client.New(u).Login(ctx, wrong); !client.IsCode(err, "unauthenticated") {
				t.Fatalf("instance %d attempt %d: %v, want unauthenticated", i, a, err)
			}
		}
		if _, err := client.New(u).Login(ctx, wrong); !client.IsCode(err, "rate_limited") {
			t.Fatalf("instance %d attempt %d: %v, want rate_limited", i, n, err)
		}
	}
}
