package controlplane_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	urls, mailDir := twoControlPlanes(t, nil)
	checkPerInstance(t, urls, mailDir, "twice")
}

// TestRateLimitsRedisDownFallBack: with its Redis unreachable, a control
// plane neither refuses every sign-in nor stops limiting: it falls back to
// the per-instance limits (fail open to the local buckets).
func TestRateLimitsRedisDownFallBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: dead, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	urls, mailDir := twoControlPlanes(t, rdb)
	checkPerInstance(t, urls, mailDir, "redisdown")
}

// TestRateLimitsSharedThroughRedis: two control planes on one Postgres
// and one real Redis draw sign-in attempts from the same buckets, so the
// configured burst holds across both: attempts spread over the two
// instances are refused once the burst is spent, on either instance.
func TestRateLimitsSharedThroughRedis(t *testing.T) {
	rdb := testRedis(t)
	urls, mailDir := twoControlPlanes(t, rdb)
	ctx := context.Background()
	req := api.SignupRequest{TenantName: "shared", Email: "ops@shared.test", Password: "password-shared-1"}
	if _, err := cptest.SignUp(ctx, client.New(urls[0]), mailDir, req); err != nil {
		t.Fatal(err)
	}
	wrong := api.SessionRequest{Email: req.Email, Password: "wrong password 1"}
	for a := 0; a < rlBurst; a++ {
		u := urls[a%2]
		if _, err := client.New(u).Login(ctx, wrong); !client.IsCode(err, "unauthenticated") {
			t.Fatalf("attempt %d on instance %d: %v, want unauthenticated", a, a%2, err)
		}
	}
	for i, u := range urls {
		if _, err := client.New(u).Login(ctx, wrong); !client.IsCode(err, "rate_limited") {
			t.Fatalf("instance %d after the shared burst: %v, want rate_limited", i, err)
		}
	}
	// The key-home lookups share their per-cell bucket the same way: the
	// buckets are in Redis under the namespace, one per limit and key.
	keys, err := rdb.Keys(ctx, "*:cp:rate:login:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("login buckets in redis: %v, %v", keys, err)
	}
}

const rlBurst = 3

// testRedis returns a client of the test Redis, skipping without one.
func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Skipf("no redis at 127.0.0.1:6379: %v", err)
	}
	return rdb
}

// twoControlPlanes starts two control planes on one fresh database with
// the sign-in burst rlBurst, sharing rdb (nil: none) under a namespace of
// their own, and seeds a fleet so signups find a cell.
func twoControlPlanes(t *testing.T, rdb redis.UniversalClient) (urls []string, mailDir string) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.Pool(t)
	mailer, mailDir := cptest.Mailer(t)
	var nsb [8]byte
	rand.Read(nsb[:])
	ns := "rltest-" + hex.EncodeToString(nsb[:])
	for i := 0; i < 2; i++ {
		cfg := controlplane.Config{DB: db, Mailer: mailer, LoginBurst: rlBurst, RateLimitNamespace: ns}
		if rdb != nil {
			cfg.RateLimitRedis = rdb
		}
		srv, err := controlplane.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	if r, ok := rdb.(*redis.Client); ok && r.Options().Addr == "127.0.0.1:6379" {
		t.Cleanup(func() {
			keys, _ := r.Keys(ctx, ns+":*").Result()
			if len(keys) > 0 {
				r.Del(ctx, keys...)
			}
		})
	}
	id, secret, err := controlplane.CreateOperatorKey(ctx, db, "rate limit test")
	if err != nil {
		t.Fatal(err)
	}
	cptest.SeedFleet(t, client.New(urls[1], client.WithAPIKey(id, secret)), cptest.TestAddrs)
	return urls, mailDir
}

// checkPerInstance checks that each of the two instances refuses sign-in
// attempts after its own burst: with local buckets, the effective burst
// is twice the configured one.
func checkPerInstance(t *testing.T, urls []string, mailDir, name string) {
	t.Helper()
	ctx := context.Background()
	const burst = rlBurst
	req := api.SignupRequest{TenantName: name, Email: "ops@" + name + ".test", Password: "password-" + name + "-1"}
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
