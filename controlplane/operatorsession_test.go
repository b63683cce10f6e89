package controlplane_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane"
)

// An operator signs in with an operator API key: the session acts as the
// key, reaches only the operator routes, and ends with the key.
func TestOperatorKeySession(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.signup("key-co")
	id, secret, s := e.operatorKeySession("console operator")
	if s.Role != "operator" || s.TenantID != "" || !s.ExpiresAt.After(e.now.Now()) {
		t.Fatalf("operator session %+v", s)
	}
	op := e.anon.With(client.WithSession(s.Token))
	me, err := op.Me(ctx)
	if err != nil || !me.Operator || me.KeyID != id || me.TenantID != "" {
		t.Fatalf("me: %+v %v", me, err)
	}
	if ts, err := op.AdminTenants(ctx, ""); err != nil || len(ts) != 1 {
		t.Fatalf("operator session lists tenants: %+v %v", ts, err)
	}
	_, err = op.Topics(ctx)
	wantCode(t, err, "permission_denied")

	for _, tc := range []struct {
		name string
		req  api.SessionRequest
		code string
	}{
		{"wrong secret", api.SessionRequest{APIKey: id + ":" + strings.Repeat("x", len(secret))}, "unauthenticated"},
		{"unknown key", api.SessionRequest{APIKey: "SLKAAAAAAAAAAAAAAAA:secret"}, "unauthenticated"},
		{"no secret", api.SessionRequest{APIKey: id}, "unauthenticated"},
		{"tenant key", api.SessionRequest{APIKey: tn.keyID + ":" + tn.secret}, "permission_denied"},
		{"key and password", api.SessionRequest{APIKey: id + ":" + secret, Email: "key-co@example.com", Password: "password-key-co-1"}, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.anon.Login(ctx, tc.req)
			wantCode(t, err, tc.code)
		})
	}

	// The session ends with the key, and signs out like any other.
	s2, err := e.anon.Login(ctx, api.SessionRequest{APIKey: id + ":" + secret})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.anon.With(client.WithSession(s2.Token)).Logout(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.anon.With(client.WithSession(s2.Token)).Me(ctx)
	wantCode(t, err, "unauthenticated")
	if err := e.op.Do(ctx, http.MethodDelete, "/v1/admin/api-keys/"+id, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = op.Me(ctx)
	wantCode(t, err, "unauthenticated")

	// It lasts no longer than SessionTTL (12 h by default).
	_, _, s3 := e.operatorKeySession("second operator")
	e.now.Advance(12*time.Hour + time.Second)
	_, err = e.anon.With(client.WithSession(s3.Token)).Me(ctx)
	wantCode(t, err, "session_expired")
}

// The console names the browser behind a sign-in with a tag of the shared
// secret; the sign-in limit then counts per browser. Anyone else's header,
// however it looks, is ignored and they are counted by their own address.
func TestSignInLimitByConsoleClient(t *testing.T) {
	secret := bytes.Repeat([]byte("s"), 32)
	e := newEnv(t, func(c *controlplane.Config) { c.ConsoleSecret = secret })
	ctx := context.Background()
	e.signup("limit-co")
	console := func(addr string) *client.Client {
		return e.anon.With(client.WithHeader(credential.ConsoleClientHeader, credential.SignConsoleClient(secret, addr)))
	}
	bad := api.SessionRequest{Password: "wrong password 1"}

	// Ten bad attempts by one browser (each for another email, so only the
	// address limit counts) use up that browser's attempts...
	for i := range 10 {
		bad.Email = "nobody" + string(rune('a'+i)) + "@example.com"
		_, err := console("192.0.2.10").Login(ctx, bad)
		wantCode(t, err, "unauthenticated")
	}
	bad.Email = "nobody-k@example.com"
	_, err := console("192.0.2.10").Login(ctx, bad)
	wantCode(t, err, "rate_limited")
	// ...and nobody else's: another browser and a direct caller sign in.
	good := api.SessionRequest{Email: "limit-co@example.com", Password: "password-limit-co-1"}
	if _, err := console("192.0.2.11").Login(ctx, good); err != nil {
		t.Fatalf("another browser through the console: %v", err)
	}
	if _, err := e.anon.Login(ctx, good); err != nil {
		t.Fatalf("a direct caller: %v", err)
	}

	// Forged headers (another secret, no tag, a copied tag on another
	// address) do not give a caller a fresh address: it is counted by its
	// own, and locked out after ten like anyone.
	forged := []string{
		credential.SignConsoleClient(bytes.Repeat([]byte("x"), 32), "192.0.2.20"),
		"192.0.2.21",
		"192.0.2.22 " + strings.SplitN(credential.SignConsoleClient(secret, "192.0.2.10"), " ", 2)[1],
	}
	var lastErr error
	for i := range 10 {
		bad.Email = "forger" + string(rune('a'+i)) + "@example.com"
		_, lastErr = e.anon.With(client.WithHeader(credential.ConsoleClientHeader, forged[i%len(forged)])).Login(ctx, bad)
	}
	// The direct caller signed in once above, so its tenth attempt is over.
	wantCode(t, lastErr, "rate_limited")
	_, err = e.anon.With(client.WithHeader(credential.ConsoleClientHeader, forged[0])).Login(ctx, good)
	wantCode(t, err, "rate_limited")
	// The addresses the forger named were not charged.
	if _, err := console("192.0.2.20").Login(ctx, good); err != nil {
		t.Fatalf("an address a forger named: %v", err)
	}
}
