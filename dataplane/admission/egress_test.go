package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEgressWaitEndsWithContext: a fetch waiting behind the budget's debt
// returns at once when its context ends (the Kafka listener bounds the
// wait by the fetch's MaxWait), and its response, never sent, takes none
// of the budget: the next tenant's response goes as soon as the debt
// the sent bytes left is paid. The clock is the test's, so the token
// count is exact.
func TestEgressWaitEndsWithContext(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EgressBytesPerSec = 1000 }) // burst 100
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.a.egress.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	if err := f.a.Egress(ctx, "acme", 10_000); err != nil { // granted: 9,900 B of debt
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { waited <- f.a.Egress(wctx, "acme", 5000) }()
	waitQueued(t, f, 1)
	wcancel()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled wait did not return")
	}
	// 10 s later the debt is paid and the bucket full (100 B). The
	// cancelled response comes up first and must take nothing.
	f.clk.Advance(10 * time.Second)
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	if err := f.a.Egress(bctx, "beta", 1); err != nil {
		t.Fatalf("beta's response after the debt was paid: %v", err)
	}
	f.a.egress.mu.Lock()
	tokens := f.a.egress.tokens
	f.a.egress.mu.Unlock()
	if tokens != 99 {
		t.Fatalf("budget %v B after beta's 1 B, want 99 (the cancelled 5,000 B not taken)", tokens)
	}
}

// waitQueued waits until n responses are queued in the egress scheduler.
func waitQueued(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.a.egress.mu.Lock()
		got := f.a.egress.drr.Len()
		f.a.egress.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d responses queued, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
