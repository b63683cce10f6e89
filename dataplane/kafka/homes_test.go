package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// countingHomes is the control plane's real key-home lookup, counted.
type countingHomes struct {
	api   *client.Client
	calls atomic.Int64
}

func (h *countingHomes) KeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	h.calls.Add(1)
	return h.api.KeyHome(ctx, cptest.Cell, keyID, secret)
}

// Keys the cell does not know cost the control plane a bounded number of
// lookups, and every one of them fails exactly as a wrong secret does on
// a listener that does no lookups.
func TestUnknownKeysCannotFloodTheControlPlane(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("floodco", "admin")
	b.waitForKey(t, tn)
	homes := &countingHomes{api: b.cp.CellClient()}

	// The answer today: a known key with a wrong secret on a listener
	// without Homes.
	rc := dialRaw(t, b.addr)
	want := rc.authenticate(tn.KeyID, "wrong")
	if want.ErrorCode != catalog.Unauthenticated.KafkaCode {
		t.Fatalf("wrong secret: code %d", want.ErrorCode)
	}
	rc.expectClosed(10 * time.Second)
	same := func(t *testing.T, addr, id, secret string) {
		t.Helper()
		rc := dialRaw(t, addr)
		got := rc.authenticate(id, secret)
		if got.ErrorCode != want.ErrorCode || *got.ErrorMessage != *want.ErrorMessage {
			t.Fatalf("key %s: code %d %q, want %d %q", id, got.ErrorCode, *got.ErrorMessage, want.ErrorCode, *want.ErrorMessage)
		}
		rc.expectClosed(10 * time.Second)
	}

	t.Run("rate limited", func(t *testing.T) {
		homes.calls.Store(0)
		// One token per ~11 days: only the burst is ever looked up.
		addr := b.startServer(t, func(c *kafka.Config) {
			c.Homes, c.HomeLimits = homes, kafka.HomeLimits{PerSecond: 1e-6, Burst: 3, MissTTL: time.Hour}
		})
		for i := 0; i < 10; i++ {
			id, _ := credential.NewAPIKey()
			same(t, addr, id, "guess")
		}
		if n := homes.calls.Load(); n != 3 {
			t.Fatalf("%d lookups for 10 unknown keys with a burst of 3", n)
		}
	})
	t.Run("misses cached", func(t *testing.T) {
		homes.calls.Store(0)
		addr := b.startServer(t, func(c *kafka.Config) {
			c.Homes, c.HomeLimits = homes, kafka.HomeLimits{MissTTL: time.Hour}
		})
		id, _ := credential.NewAPIKey()
		for i := 0; i < 5; i++ {
			same(t, addr, id, "guess")
		}
		// Malformed key ids are never looked up.
		same(t, addr, "not-a-key-id", "guess")
		if n := homes.calls.Load(); n != 1 {
			t.Fatalf("%d lookups for one unknown key tried 5 times", n)
		}
		// A key of this cell with a wrong secret is never looked up.
		same(t, addr, tn.KeyID, "wrong")
		if n := homes.calls.Load(); n != 1 {
			t.Fatalf("a known key with a wrong secret was looked up (%d lookups)", n)
		}
	})
	t.Run("control plane down", func(t *testing.T) {
		down := kafka.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
			return client.New("http://127.0.0.1:1").KeyHome(ctx, cptest.Cell, keyID, secret)
		})
		addr := b.startServer(t, func(c *kafka.Config) { c.Homes = down })
		id, _ := credential.NewAPIKey()
		same(t, addr, id, "guess")
		// The cell's own keys do not need the control plane.
		rc := dialRaw(t, addr)
		if got := rc.authenticate(tn.KeyID, tn.Secret); got.ErrorCode != 0 {
			t.Fatalf("own key with the control plane down: code %d", got.ErrorCode)
		}
	})
}
