package keyhome

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
)

// scriptedHomes answers from a script and counts calls; release, when
// set, holds every call until it is closed. It stands in for the control
// plane only to inject its failures and slowness.
type scriptedHomes struct {
	calls   atomic.Int64
	mu      sync.Mutex
	answer  wire.KeyHome
	err     error
	release chan struct{}
}

func (h *scriptedHomes) KeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	h.calls.Add(1)
	h.mu.Lock()
	rel, a, err := h.release, h.answer, h.err
	h.mu.Unlock()
	if rel != nil {
		select {
		case <-rel:
		case <-ctx.Done():
			return wire.KeyHome{}, ctx.Err()
		}
	}
	return a, err
}

func TestHomeCache(t *testing.T) {
	ctx := context.Background()
	valid := wire.KeyHome{Status: wire.KeyValid, TenantID: "tn_b", Cell: "cell-2"}
	newCache := func(h Homes, clk *testkit.Clock) *Cache {
		l := Limits{TTL: 2 * time.Second, MissTTL: 10 * time.Second, PerSecond: 1000, Burst: 1000, MaxEntries: 4}
		return NewCache(h, l, clk.Now)
	}

	t.Run("ttl and stale answers", func(t *testing.T) {
		clk := testkit.NewClock(time.Unix(1_000_000, 0))
		h := &scriptedHomes{answer: valid}
		c := newCache(h, clk)
		for i := 0; i < 3; i++ {
			if got, err := c.Lookup(ctx, "k", "s"); err != nil || got.Status != wire.KeyValid {
				t.Fatalf("lookup: %+v %v", got, err)
			}
		}
		if h.calls.Load() != 1 {
			t.Fatalf("%d calls within the TTL", h.calls.Load())
		}
		if _, err := c.Lookup(ctx, "k", "other secret"); err != nil || h.calls.Load() != 2 {
			t.Fatalf("another secret is another entry: %v, %d calls", err, h.calls.Load())
		}
		// The control plane fails: the valid answer stands in for a minute.
		h.err = errors.New("control plane down")
		clk.Advance(30 * time.Second)
		if got, err := c.Lookup(ctx, "k", "s"); err != nil || got.Status != wire.KeyValid {
			t.Fatalf("stale within a minute: %+v %v", got, err)
		}
		clk.Advance(31 * time.Second)
		if _, err := c.Lookup(ctx, "k", "s"); err == nil {
			t.Fatal("a stale answer over a minute old was used")
		}
	})

	t.Run("misses", func(t *testing.T) {
		clk := testkit.NewClock(time.Unix(1_000_000, 0))
		h := &scriptedHomes{answer: wire.KeyHome{Status: wire.KeyInvalid}}
		c := newCache(h, clk)
		c.Lookup(ctx, "k", "s")
		clk.Advance(9 * time.Second)
		if got, _ := c.Lookup(ctx, "k", "s"); got.Status != wire.KeyInvalid || h.calls.Load() != 1 {
			t.Fatalf("miss within MissTTL: %+v, %d calls", got, h.calls.Load())
		}
		// A revoked key's stale valid answer is never used once a miss
		// replaced it.
		clk.Advance(2 * time.Second)
		h.err = errors.New("down")
		if _, err := c.Lookup(ctx, "k", "s"); err == nil {
			t.Fatal("an expired miss answered when the lookup failed")
		}
	})

	t.Run("concurrent lookups of one key coalesce", func(t *testing.T) {
		clk := testkit.NewClock(time.Unix(1_000_000, 0))
		h := &scriptedHomes{answer: valid, release: make(chan struct{})}
		c := newCache(h, clk)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := c.Lookup(ctx, "k", "s"); err != nil || got.Status != wire.KeyValid {
					errs <- errors.New("bad answer")
				}
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for h.calls.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(h.release)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := h.calls.Load(); n != 1 {
			t.Fatalf("%d calls for 8 concurrent lookups", n)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		clk := testkit.NewClock(time.Unix(1_000_000, 0))
		h := &scriptedHomes{answer: wire.KeyHome{Status: wire.KeyInvalid}}
		c := newCache(h, clk)
		for i := 0; i < 20; i++ {
			c.Lookup(ctx, string(rune('a'+i)), "s")
			clk.Advance(3 * time.Second) // older than the TTL, younger than MissTTL
		}
		if n := c.Size(); n > 4 {
			t.Fatalf("%d entries, limit 4", n)
		}
	})
}
