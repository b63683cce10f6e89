package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestKeyHomeLimitSharedThroughRedis: the key-home limiters of two
// control planes on one real Redis draw from one bucket per cell: the
// burst is spent by calls spread over both, after which both refuse with
// the bucket's wait, while another cell's bucket is untouched. The
// per-cell burst and rate are the real ones; the calls are quicker than
// a refill (20 ms), so a spent burst stays spent for the check.
func TestKeyHomeLimitSharedThroughRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Skipf("no redis at 127.0.0.1:6379: %v", err)
	}
	var nsb [8]byte
	rand.Read(nsb[:])
	ns := "rltest-" + hex.EncodeToString(nsb[:])
	t.Cleanup(func() {
		if keys, _ := rdb.Keys(ctx, ns+":*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	cfg := Config{RateLimitRedis: rdb, RateLimitNamespace: ns, Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
	// An hour per token: nothing refills during the test.
	a := newLimiter("key_home", time.Hour, keyHomeBurst, &cfg)
	b := newLimiter("key_home", time.Hour, keyHomeBurst, &cfg)
	for i := 0; i < keyHomeBurst; i++ {
		l := a
		if i%2 == 1 {
			l = b
		}
		if ok, _ := l.allow(ctx, "cell-1"); !ok {
			t.Fatalf("lookup %d of the burst %d refused", i, keyHomeBurst)
		}
	}
	for name, l := range map[string]*limiter{"a": a, "b": b} {
		ok, wait := l.allow(ctx, "cell-1")
		if ok || wait < 59*time.Minute || wait > time.Hour {
			t.Fatalf("instance %s after the shared burst: allowed %v, wait %v; want refused, about an hour", name, ok, wait)
		}
	}
	if ok, _ := b.allow(ctx, "cell-2"); !ok {
		t.Fatal("another cell's lookup refused")
	}
	// The local buckets were never used: the limits held in Redis alone.
	if len(a.buckets)+len(b.buckets) != 0 {
		t.Fatalf("local buckets used with Redis up: %d, %d", len(a.buckets), len(b.buckets))
	}
}

// BenchmarkLimiterRedis is one sign-in check (two keys) through Redis,
// what a shared limit adds to a sign-in.
func BenchmarkLimiterRedis(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Skipf("no redis at 127.0.0.1:6379: %v", err)
	}
	cfg := Config{RateLimitRedis: rdb, RateLimitNamespace: "rlbench", Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
	l := newLimiter("login", time.Nanosecond, 1<<30, &cfg)
	b.Cleanup(func() {
		if keys, _ := rdb.Keys(ctx, "rlbench:*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	for b.Loop() {
		if ok, _ := l.allow(ctx, "email:a@b.test", "addr:127.0.0.1"); !ok {
			b.Fatal("refused")
		}
	}
	if len(l.buckets) != 0 {
		b.Fatal("fell back to local buckets")
	}
}
