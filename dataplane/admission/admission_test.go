package admission

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/quotas"
)

// disk is an injectable disk-usage source.
type disk struct{ used, total atomic.Int64 }

func (d *disk) usage() (int64, int64, error) { return d.used.Load(), d.total.Load(), nil }

func (d *disk) set(percent int64) { d.total.Store(1000); d.used.Store(10 * percent) }

type fixture struct {
	a    *Admission
	b    *quotas.Buckets
	clk  *testkit.Clock
	disk *disk
	reg  *prometheus.Registry
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{clk: testkit.NewClock(time.Unix(1_000_000, 0)), disk: &disk{}, reg: prometheus.NewRegistry()}
	f.disk.set(10)
	var err error
	f.b, err = quotas.New(quotas.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{BrokerID: "b-1", Buckets: f.b, Disk: f.disk.usage, Registerer: f.reg, Now: f.clk.Now,
		ShareMode: func() bool { return true }}
	if mod != nil {
		mod(&cfg)
	}
	f.a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.a.SetState(wire.CellState{Brokers: []wire.Broker{{ID: "b-1"}}, Tenants: []wire.Tenant{
		{ID: "acme", Plan: "free", Quotas: wire.Quotas{MaxConnections: 2, MaxRequestsPerSec: 10, MaxStorageBytes: 1000, MaxMessageBytes: 100}},
		{ID: "beta", Plan: "standard"},
	}})
	return f
}

func refusal(t *testing.T, err error, want Cause, entry *catalog.Entry) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) || r.Cause != want || !catalog.Has(err, entry) {
		t.Fatalf("got %v, want a %s refusal with %s", err, want, entry.Code)
	}
	return r
}

func TestDiskWatermarks(t *testing.T) {
	f := newFixture(t, nil)
	f.a.Poll()
	if err := f.a.CheckProduce("acme", 10); err != nil {
		t.Fatalf("below soft: %v", err)
	}
	f.disk.set(93)
	f.a.Poll()
	err := f.a.CheckProduce("acme", 10)
	r := refusal(t, err, CauseDiskFull, catalog.DiskFull)
	msg := catalog.Of(err).Message
	for _, want := range []string{"broker b-1", "93.0% full", "90% hard watermark"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if !r.Err.Entry.Retriable || r.RetryAfter <= 0 {
		t.Errorf("disk full is not retriable with a retry-after: %+v", r)
	}
	if got := testutil.ToFloat64(f.a.metrics.diskState); got != 2 {
		t.Errorf("disk state metric %v, want 2", got)
	}
	f.disk.set(85) // soft: produce admitted, heaviest writers throttled
	f.a.RecordProduce("acme", 900, 1)
	f.a.RecordProduce("beta", 100, 1)
	f.a.Poll()
	if err := f.a.CheckProduce("acme", 10); err != nil {
		t.Fatalf("soft: %v", err)
	}
	if f.a.DiskState() != quotas.DiskSoft {
		t.Fatalf("state %v, want soft", f.a.DiskState())
	}
	if d := f.a.RecordProduce("acme", 10, 1); d != f.a.cfg.SoftThrottle {
		t.Errorf("heaviest writer throttled %v, want %v", d, f.a.cfg.SoftThrottle)
	}
	if d := f.a.RecordProduce("beta", 10, 1); d != 0 {
		t.Errorf("light writer throttled %v above soft", d)
	}
	f.disk.set(50)
	f.a.Poll()
	if f.a.DiskState() != quotas.DiskOK {
		t.Fatalf("state %v after falling below soft", f.a.DiskState())
	}
	if d := f.a.RecordProduce("acme", 10, 1); d != 0 {
		t.Errorf("throttled %v after recovery", d)
	}
	if got := f.a.Rejections("acme", CauseDiskFull); got != 1 {
		t.Errorf("disk_full rejections %v, want 1", got)
	}
}

func TestTenantLimits(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Storage = func() map[string]int64 { return map[string]int64{"acme": 1000, "beta": 1 << 40} }
	})
	refusal(t, f.a.CheckProduce("acme", 101), CauseMessageSize, catalog.MessageTooLarge)
	if err := f.a.CheckProduce("acme", 100); err != nil {
		t.Fatalf("before polling storage: %v", err)
	}
	f.a.Poll()
	refusal(t, f.a.CheckProduce("acme", 10), CauseStorage, catalog.StorageQuotaExceeded)
	if err := f.a.CheckProduce("beta", 10); err != nil {
		t.Fatalf("a tenant without a storage quota: %v", err)
	}

	r1, err := f.a.Connect("acme")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := f.a.Connect("acme")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.a.Connect("acme")
	refusal(t, err, CauseConnections, catalog.ConnectionLimit)
	r1()
	r1() // idempotent
	r3, err := f.a.Connect("acme")
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2()
	r3()

	// 10 requests/s with a burst of 10: the 11th waits 100ms.
	for i := range 10 {
		if d := f.a.Request("acme"); d != 0 {
			t.Fatalf("request %d throttled %v", i, d)
		}
	}
	if d := f.a.Request("acme"); d != 100*time.Millisecond {
		t.Fatalf("11th request throttled %v, want 100ms", d)
	}
	refusal(t, f.a.Admit("acme", OpFetch, 0), CauseRequestRate, catalog.RequestRateExceeded)
	for _, c := range []Cause{CauseMessageSize, CauseStorage, CauseConnections, CauseRequestRate} {
		if got := f.a.Rejections("acme", c); got != 1 {
			t.Errorf("%s rejections %v, want 1", c, got)
		}
	}
}

func TestAdmitAndRecord(t *testing.T) {
	f := newFixture(t, nil)
	f.b.Set("beta", quotas.Limits{{Rate: 1000}, {}, {Rate: 1000}}, f.clk.Now())
	if err := f.a.Admit("beta", OpProduce, 10); err != nil {
		t.Fatal(err)
	}
	// Burst 500 (500ms at 1000/s); 2,500 bytes leave a 2,000-byte debt.
	if d := f.a.Record("beta", OpProduce, 2500, 1); d != 2*time.Second {
		t.Fatalf("throttle %v, want 2s", d)
	}
	r := refusal(t, f.a.Admit("beta", OpProduce, 10), CauseProduceRate, catalog.ThroughputExceeded)
	if r.RetryAfter != 2*time.Second || r.Err.Entry.HTTPStatus != 429 {
		t.Fatalf("refusal %+v", r)
	}
	if err := f.a.Admit("beta", OpFetch, 0); err != nil {
		t.Fatalf("fetch is a separate bucket: %v", err)
	}
	f.clk.Advance(2 * time.Second)
	if err := f.a.Admit("beta", OpProduce, 10); err != nil {
		t.Fatalf("after the debt is repaid: %v", err)
	}
	if got := testutil.ToFloat64(f.a.metrics.throttled.WithLabelValues("beta", "produce_bytes")); got != 2 {
		t.Errorf("throttle seconds %v, want 2", got)
	}
	if got := celltest.Gauge(t, f.reg, "sluice_quota_share_mode", "mode", "shared"); got != 1 {
		t.Errorf("share mode shared = %v, want 1", got)
	}
}

// TestEgressFairness offers a heavy tenant's fetches and a light one's at
// once against a small egress budget: the order of grants follows DRR, so
// the light tenant, weight 4 (standard), gets four times the free heavy
// tenant's bytes while both wait.
func TestEgressFairness(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EgressBytesPerSec = 1 << 30; c.EgressQuantum = 100 })
	e := f.a.egress
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Queue directly (as wait does) before the scheduler runs, so that
	// the order of grants is DRR's alone.
	var order []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	enqueue := func(id string, n int) {
		for range n {
			w := &egressWaiter{ch: make(chan struct{})}
			e.mu.Lock()
			e.drr.Enqueue(id, 100)
			e.waiting[id] = append(e.waiting[id], w)
			e.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-w.ch
				mu.Lock()
				order = append(order, id)
				mu.Unlock()
			}()
		}
	}
	enqueue("acme", 20)
	enqueue("beta", 20)
	// Grant them in order without the goroutine, to observe DRR's order.
	var grants []string
	for range 25 {
		e.mu.Lock()
		id, _, ok := e.drr.Next()
		if !ok {
			e.mu.Unlock()
			t.Fatal("nothing pending")
		}
		q := e.waiting[id]
		e.waiting[id] = q[1:]
		close(q[0].ch)
		e.mu.Unlock()
		grants = append(grants, id)
	}
	var beta int
	for _, id := range grants {
		if id == "beta" {
			beta++
		}
	}
	if beta != 20 {
		t.Fatalf("beta (weight 4) got %d of the first 25 grants, want 20: %v", beta, grants)
	}
	go e.run(ctx)
	wg.Wait() // the scheduler grants the rest
	if err := f.a.Egress(ctx, "acme", 10); err != nil {
		t.Fatal(err)
	}
}

func TestEgressPacesAtBudget(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EgressBytesPerSec = 1e6; c.Now = time.Now })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.a.egress.run(ctx)
	}()
	// 200 KB at 1 MB/s: the first 100 KB pass on the burst, the rest
	// waits for the budget. Only the order is asserted, not the time.
	for range 20 {
		if err := f.a.Egress(ctx, "acme", 10_000); err != nil {
			t.Fatal(err)
		}
	}
	f.a.egress.mu.Lock()
	tokens := f.a.egress.tokens
	f.a.egress.mu.Unlock()
	if tokens >= f.a.egress.burst {
		t.Fatalf("budget not spent: %v tokens", tokens)
	}
	cancel()
	<-done
	if err := f.a.Egress(context.Background(), "acme", 10); err != nil {
		t.Fatalf("after the scheduler stopped: %v", err)
	}
}

func TestConfig(t *testing.T) {
	b, _ := quotas.New(quotas.Config{})
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no buckets", Config{}},
		{"negative budget", Config{Buckets: b, EgressBytesPerSec: -1}},
		{"bad fraction", Config{Buckets: b, SoftFraction: 2}},
		{"bad watermarks", Config{Buckets: b, Watermarks: quotas.WatermarkConfig{Soft: 0.95, Hard: 0.9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// tokens is what a tenant's request-rate bucket holds at the fixture's
// time.
func (f *fixture) tokens(tenant string) float64 {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	return f.a.tenants[tenant].requests.TokensAt(f.clk.Now())
}

// TestRefusalTakesNothing: a refused request leaves the tenant's buckets
// as they were, so its Retry-After is the true wait, however often the
// client asks meanwhile, and waiting it out is enough.
func TestRefusalTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused int // requests refused before the wait ends
	}{
		{"one refusal", 1},
		{"a client retrying without backoff", 10_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil) // acme: 10 requests/s, burst 10
			for i := range 10 {
				if err := f.a.Admit("acme", OpFetch, 0); err != nil {
					t.Fatalf("request %d within the burst: %v", i, err)
				}
			}
			f.clk.Advance(30 * time.Millisecond) // 0.3 tokens back
			before := f.tokens("acme")
			for i := range tc.refused {
				r := refusal(t, f.a.Admit("acme", OpFetch, 0), CauseRequestRate, catalog.RequestRateExceeded)
				if r.RetryAfter != 70*time.Millisecond {
					t.Fatalf("refusal %d: retry after %v, want 70ms (0.7 of a token at 10/s)", i, r.RetryAfter)
				}
				if !strings.Contains(r.Err.Message, "retry in 70ms") {
					t.Fatalf("refusal %d says %q", i, r.Err.Message)
				}
			}
			if after := f.tokens("acme"); after != before {
				t.Fatalf("%d refusals changed the bucket from %v to %v tokens", tc.refused, before, after)
			}
			f.clk.Advance(70 * time.Millisecond)
			if err := f.a.Admit("acme", OpFetch, 0); err != nil {
				t.Fatalf("after waiting the retry-after: %v", err)
			}
			if got := f.a.Rejections("acme", CauseRequestRate); got != float64(tc.refused) {
				t.Errorf("request_rate rejections %v, want %d", got, tc.refused)
			}
			// The Kafka listener, which records then throttles, is not
			// made to wait for the HTTP refusals either.
			f.clk.Advance(100 * time.Millisecond)
			if d := f.a.Request("acme"); d != 0 {
				t.Fatalf("kafka request throttled %v after the refusals", d)
			}
		})
	}
}

// TestThroughputRefusalTakesNoRequest: a request refused for throughput
// takes nothing from the request rate, and its wait is the bucket's true
// one even beyond MaxThrottle.
func TestThroughputRefusalTakesNoRequest(t *testing.T) {
	f := newFixture(t, nil)
	f.b.Set("acme", quotas.Limits{{Rate: 1000}, {}, {}}, f.clk.Now())
	// Burst 500: 45,500 bytes leave 45 s of debt, beyond the 30 s cap.
	if d := f.a.Record("acme", OpProduce, 45_500, 1); d != 30*time.Second {
		t.Fatalf("kafka throttle %v, want the 30s cap", d)
	}
	before := f.tokens("acme")
	for range 100 {
		r := refusal(t, f.a.Admit("acme", OpProduce, 10), CauseProduceRate, catalog.ThroughputExceeded)
		if r.RetryAfter != 45*time.Second || !strings.Contains(r.Err.Message, "retry in 45s") {
			t.Fatalf("refusal: retry after %v, %q; want the true 45s", r.RetryAfter, r.Err.Message)
		}
	}
	if after := f.tokens("acme"); after != before {
		t.Fatalf("throughput refusals took %v request tokens", before-after)
	}
	if d := f.b.Throttle("acme", quotas.ProduceBytes, f.clk.Now()); d != 45*time.Second {
		t.Fatalf("refusals changed the produce debt: %v left, want 45s", d)
	}
	f.clk.Advance(45 * time.Second)
	if err := f.a.Admit("acme", OpProduce, 10); err != nil {
		t.Fatalf("after the debt is repaid: %v", err)
	}
}

// TestAdmitForwarded: a request another broker admitted and forwarded
// is not counted again against the request rate, but its throughput is
// still checked where the bytes move.
func TestAdmitForwarded(t *testing.T) {
	f := newFixture(t, nil)
	for range 10 {
		if err := f.a.Admit("acme", OpFetch, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := f.tokens("acme")
	for i := range 1000 {
		if err := f.a.AdmitForwarded("acme", OpFetch, 0); err != nil {
			t.Fatalf("forwarded request %d: %v", i, err)
		}
	}
	if after := f.tokens("acme"); after != before {
		t.Fatalf("forwarded requests took %v request tokens", before-after)
	}
	refusal(t, f.a.Admit("acme", OpFetch, 0), CauseRequestRate, catalog.RequestRateExceeded)
	f.b.Set("acme", quotas.Limits{{}, {}, {Rate: 1000}}, f.clk.Now())
	f.a.Record("acme", OpFetch, 2500, 0)
	r := refusal(t, f.a.AdmitForwarded("acme", OpFetch, 0), CauseFetchRate, catalog.ThroughputExceeded)
	if r.RetryAfter != 2*time.Second {
		t.Fatalf("forwarded fetch over its quota: retry after %v, want 2s", r.RetryAfter)
	}
}
