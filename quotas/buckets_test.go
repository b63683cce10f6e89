package quotas

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newBuckets(t testing.TB, cfg Config) *Buckets {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func within(got, want, frac float64) bool {
	return math.Abs(got-want) <= frac*want
}

// client is a scripted Kafka producer that self-throttles as KIP-219 asks:
// it sends batches of size at most offered units/s and, after each response,
// waits at least the throttle it was given.
type client struct {
	id      string
	kind    Kind
	batch   int64
	offered float64 // units per second the client would send if never throttled
	next    time.Time
	sent    float64
}

// run drives c against b until end and returns the units sent in [from, end).
func (c *client) run(b *Buckets, from, end time.Time) float64 {
	var window float64
	pace := time.Duration(float64(c.batch) / c.offered * float64(time.Second))
	for c.next.Before(end) {
		now := c.next
		thr := b.Record(c.id, c.kind, c.batch, now)
		c.sent += float64(c.batch)
		if !now.Before(from) {
			window += float64(c.batch)
		}
		c.next = now.Add(max(pace, thr))
	}
	return window
}

func TestFlatOutConvergesToQuota(t *testing.T) {
	const mb = 1e6
	for _, tc := range []struct {
		name    string
		kind    Kind
		rate    float64
		batch   int64
		offered float64 // multiple of rate
	}{
		{"4x 5MB/s in 256KiB batches", ProduceBytes, 5 * mb, 256 << 10, 4},
		{"4x 5MB/s in 16KiB batches", ProduceBytes, 5 * mb, 16 << 10, 4},
		{"4x 5MB/s in 1MiB batches", ProduceBytes, 5 * mb, 1 << 20, 4},
		{"1.5x 5MB/s in 64KiB batches", ProduceBytes, 5 * mb, 64 << 10, 1.5},
		{"4x 20k messages/s in 500-message batches", ProduceMessages, 20_000, 500, 4},
		{"10x 2MB/s fetch in 256KiB responses", FetchBytes, 2 * mb, 256 << 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuckets(t, Config{})
			var l Limits
			l[tc.kind].Rate = tc.rate
			b.Set("acme", l, t0)
			c := &client{id: "acme", kind: tc.kind, batch: tc.batch, offered: tc.offered * tc.rate, next: t0}
			const secs = 20
			c.run(b, t0, t0.Add(secs*time.Second))
			got := c.sent / secs
			if !within(got, tc.rate, 0.05) {
				t.Errorf("rate over %ds = %.0f/s, want %.0f/s ±5%%", secs, got, tc.rate)
			}
			t.Logf("rate over %ds = %.0f/s (%.2f%% of quota)", secs, got, 100*got/tc.rate)
		})
	}
}

func TestUnderQuotaIsNeverThrottled(t *testing.T) {
	b := newBuckets(t, Config{})
	var l Limits
	l[ProduceBytes].Rate = 5e6
	b.Set("acme", l, t0)
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if thr := b.Record("acme", ProduceBytes, 400_000, now); thr != 0 { // 4 MB/s
			t.Fatalf("request %d throttled %v under quota", i, thr)
		}
	}
}

func TestBatchLargerThanBurst(t *testing.T) {
	const rateBps = 1 << 20 // 1 MiB/s
	for _, tc := range []struct {
		name      string
		second    time.Duration // when the next request arrives after the big batch
		size      int64         // its size
		wantFirst time.Duration
		wantNext  time.Duration
	}{
		// 1 MiB against a full 64 KiB bucket leaves 960 KiB of debt:
		// 960/1024 s at 1 MiB/s.
		{"client waits as told", 937500 * time.Microsecond, 4 << 10, 937500 * time.Microsecond, 3906250 * time.Nanosecond},
		{"client returns early", 500 * time.Millisecond, 4 << 10, 937500 * time.Microsecond, 441406250 * time.Nanosecond},
		{"client returns late", 2 * time.Second, 4 << 10, 937500 * time.Microsecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuckets(t, Config{})
			var l Limits
			l[ProduceBytes] = Limit{Rate: rateBps, Burst: 64 << 10}
			b.Set("acme", l, t0)
			first := b.Record("acme", ProduceBytes, 1<<20, t0)
			if d := first - tc.wantFirst; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("throttle after 1 MiB = %v, want %v", first, tc.wantFirst)
			}
			if got, want := b.Debt("acme", ProduceBytes, t0), float64(960<<10); got != want {
				t.Errorf("debt = %v, want %v", got, want)
			}
			next := b.Record("acme", ProduceBytes, tc.size, t0.Add(tc.second))
			if d := next - tc.wantNext; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("throttle of next request = %v, want %v", next, tc.wantNext)
			}
		})
	}
}

func TestQuotaChangeKeepsDebt(t *testing.T) {
	b := newBuckets(t, Config{})
	var l Limits
	l[ProduceBytes] = Limit{Rate: 1e6, Burst: 100_000}
	b.Set("acme", l, t0)
	b.Record("acme", ProduceBytes, 2_100_000, t0) // 2 MB of debt: 2 s at 1 MB/s
	l[ProduceBytes].Rate = 4e6
	b.Set("acme", l, t0.Add(time.Second)) // 1 MB repaid at the old rate
	if got := b.Debt("acme", ProduceBytes, t0.Add(time.Second)); !within(got, 1e6, 1e-9) {
		t.Fatalf("debt after change = %v, want 1e6", got)
	}
	if got, want := b.Throttle("acme", ProduceBytes, t0.Add(time.Second)), 250*time.Millisecond; got != want {
		t.Fatalf("throttle after change = %v, want %v (1 MB at the new 4 MB/s)", got, want)
	}
}

// A client told to wait 2 s is still held back after a rate rise repays its
// debt in 0.5 s: Throttling says so until the 2 s end, so the broker keeps
// publishing its demand as throttled.
func TestThrottlingOutlastsDebtAfterRateRise(t *testing.T) {
	b := newBuckets(t, Config{})
	var l Limits
	l[ProduceBytes] = Limit{Rate: 1e6, Burst: 100_000}
	b.Set("acme", l, t0)
	if b.Throttling("acme", ProduceBytes, t0) {
		t.Fatal("a fresh tenant is throttling")
	}
	thr := b.Record("acme", ProduceBytes, 2_100_000, t0)
	if thr != 2*time.Second {
		t.Fatalf("throttle = %v, want 2s", thr)
	}
	l[ProduceBytes].Rate = 4e6
	b.Set("acme", l, t0)
	at := t0.Add(time.Second)
	if d := b.Debt("acme", ProduceBytes, at); d != 0 {
		t.Fatalf("debt 1 s after the rise = %v, want 0 (repaid in 0.5 s)", d)
	}
	if !b.Throttling("acme", ProduceBytes, at) {
		t.Fatal("not throttling while the client still waits out its 2 s")
	}
	if b.Throttling("acme", ProduceBytes, t0.Add(2*time.Second)) {
		t.Fatal("throttling after the wait ended with no debt")
	}
	if b.Throttling("nobody", ProduceBytes, at) || b.Throttling("acme", ProduceMessages, at) {
		t.Fatal("an unknown tenant or an unlimited kind is throttling")
	}
}

// Repay shortens the wait of a request that finds no debt, not the rate:
// at a 100 kB/s share with a 1 MB/s repay rate, a 1 MB batch waits 0.9 s
// instead of 9 s; the next one waits out the whole debt at 100 kB/s, and a
// client that keeps sending 1 MB batches gets 100 kB/s over ten minutes.
func TestRepayShortensOnlyAWaitOutOfDebt(t *testing.T) {
	b := newBuckets(t, Config{})
	var l Limits
	l[ProduceBytes] = Limit{Rate: 100_000, Burst: 100_000, Repay: 1e6}
	b.Set("acme", l, t0)
	if got, want := b.Record("acme", ProduceBytes, 1_000_000, t0), 900*time.Millisecond; got != want {
		t.Fatalf("first wait = %v, want %v (0.9 MB of debt at 1 MB/s)", got, want)
	}
	second := t0.Add(900 * time.Millisecond)
	if got, want := b.Record("acme", ProduceBytes, 1_000_000, second), 18100*time.Millisecond; got != want {
		t.Fatalf("second wait = %v, want %v (1.81 MB of debt at 100 kB/s)", got, want)
	}
	c := &client{id: "acme", kind: ProduceBytes, batch: 1_000_000, offered: 1e9, next: second.Add(18100 * time.Millisecond)}
	got := c.run(b, t0, t0.Add(600*time.Second))
	if rate := (got + 2e6) / 600; !within(rate, 100_000, 0.05) {
		t.Fatalf("rate over ten minutes = %.0f B/s, want 100000 ±5%%", rate)
	}
	l[ProduceBytes].Repay = 50_000 // below Rate: the rate counts
	b.Set("fresh", l, t0)
	if got, want := b.Record("fresh", ProduceBytes, 1_100_000, t0), 10*time.Second; got != want {
		t.Fatalf("wait with Repay below Rate = %v, want %v", got, want)
	}
}

func TestQuotaChangeMidRun(t *testing.T) {
	const mb = 1e6
	for _, tc := range []struct {
		name          string
		before, after float64
	}{
		{"lowered 10 to 2 MB/s", 10 * mb, 2 * mb},
		{"raised 2 to 10 MB/s", 2 * mb, 10 * mb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuckets(t, Config{})
			var l Limits
			l[ProduceBytes].Rate = tc.before
			b.Set("acme", l, t0)
			c := &client{id: "acme", kind: ProduceBytes, batch: 128 << 10, offered: 40 * mb, next: t0}
			mid, end := t0.Add(20*time.Second), t0.Add(40*time.Second)
			first := c.run(b, t0, mid) / 20
			l[ProduceBytes].Rate = tc.after
			b.Set("acme", l, mid)
			// The first seconds after the change still repay the old debt
			// or use the old burst; judge the new rate on the last 15 s.
			second := c.run(b, mid.Add(5*time.Second), end) / 15
			if !within(first, tc.before, 0.05) {
				t.Errorf("rate before change = %.0f, want %.0f ±5%%", first, tc.before)
			}
			if !within(second, tc.after, 0.05) {
				t.Errorf("rate after change = %.0f, want %.0f ±5%%", second, tc.after)
			}
		})
	}
}

func TestUnlimited(t *testing.T) {
	b := newBuckets(t, Config{})
	if thr := b.Record("nobody", ProduceBytes, 1<<30, t0); thr != 0 {
		t.Errorf("unknown tenant throttled %v", thr)
	}
	b.Set("acme", Limits{ProduceBytes: {Rate: 1000}}, t0)
	if thr := b.Record("acme", FetchBytes, 1<<30, t0); thr != 0 {
		t.Errorf("kind without a quota throttled %v", thr)
	}
	if thr := b.Record("acme", ProduceBytes, 1500, t0); thr != time.Second {
		t.Errorf("limited kind throttled %v, want 1s", thr)
	}
	b.Set("acme", Limits{}, t0) // limit lifted
	if thr := b.Record("acme", ProduceBytes, 1<<30, t0); thr != 0 {
		t.Errorf("lifted limit throttled %v", thr)
	}
}

func TestMaxThrottleKeepsDebt(t *testing.T) {
	b := newBuckets(t, Config{MaxThrottle: 5 * time.Second})
	var l Limits
	l[ProduceBytes] = Limit{Rate: 1000, Burst: 1000}
	b.Set("acme", l, t0)
	if thr := b.Record("acme", ProduceBytes, 21_000, t0); thr != 5*time.Second {
		t.Fatalf("throttle = %v, want the 5s cap", thr)
	}
	// 20 s of debt; after 5 s, 15 s remain and are still capped.
	if thr := b.Throttle("acme", ProduceBytes, t0.Add(5*time.Second)); thr != 5*time.Second {
		t.Fatalf("throttle after 5s = %v, want the 5s cap", thr)
	}
	if thr := b.Throttle("acme", ProduceBytes, t0.Add(18*time.Second)); thr != 2*time.Second {
		t.Fatalf("throttle after 18s = %v, want 2s", thr)
	}
}

func TestTimeGoingBackwardsIsNotCreditedTwice(t *testing.T) {
	b := newBuckets(t, Config{})
	var l Limits
	l[ProduceBytes] = Limit{Rate: 1000, Burst: 1000}
	b.Set("acme", l, t0)
	b.Record("acme", ProduceBytes, 3000, t0.Add(time.Second)) // 2000 of debt at t0+1s
	b.Record("acme", ProduceBytes, 0, t0)                     // a late caller with an older clock reading
	if got := b.Debt("acme", ProduceBytes, t0.Add(2*time.Second)); got != 1000 {
		t.Fatalf("debt = %v, want 1000", got)
	}
}

func TestTakeDemand(t *testing.T) {
	b := newBuckets(t, Config{})
	b.Set("acme", Limits{ProduceBytes: {Rate: 1000}}, t0)
	b.Set("globex", Limits{}, t0)
	for i := range 10 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		b.Record("acme", ProduceBytes, 500, now) // throttled, still recorded
		b.Record("acme", ProduceMessages, 5, now)
		b.Record("globex", FetchBytes, 100, now)
	}
	d := b.TakeDemand(t0.Add(2 * time.Second))
	if got, want := d["acme"], (Demand{2500, 25, 0}); got != want {
		t.Errorf("acme demand = %v, want %v", got, want)
	}
	if got, want := d["globex"], (Demand{0, 0, 500}); got != want {
		t.Errorf("globex demand = %v, want %v", got, want)
	}
	d = b.TakeDemand(t0.Add(3 * time.Second))
	if got := d["acme"]; got != (Demand{}) {
		t.Errorf("demand after a quiet window = %v, want zero", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{BurstWindow: -time.Second}); err == nil {
		t.Fatal("negative burst window accepted")
	}
}

// TestRecordLongRunProperty: a client that sends batches of arbitrary sizes
// as fast as its throttles allow gets the quota over a minute, within one
// burst and one batch.
func TestRecordLongRunProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rapid.Float64Range(1e3, 1e8).Draw(t, "rate")
		// Keep the run under ~100k requests: batches of at least 1/1000 s
		// of quota, bursts of at most a second.
		minSize := int64(r/1000) + 1
		burst := rapid.IntRange(1, int(r)).Draw(t, "burst")
		sizes := rapid.SliceOfN(rapid.Int64Range(minSize, max(minSize, 8<<20)), 1, 8).Draw(t, "sizes")
		b, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		var l Limits
		l[ProduceBytes] = Limit{Rate: r, Burst: burst}
		b.Set("acme", l, t0)
		end := t0.Add(time.Minute)
		var sent, largest float64
		now := t0
		for i := 0; now.Before(end); i++ {
			n := sizes[i%len(sizes)]
			thr := b.Record("acme", ProduceBytes, n, now)
			sent += float64(n)
			largest = max(largest, float64(n))
			now = now.Add(max(thr, time.Nanosecond))
			if i > 1_000_000 {
				t.Fatal("client never reached the end of the run")
			}
		}
		want := r * 60
		if sent < want-largest-1 || sent > want+float64(burst)+largest+1 {
			t.Fatalf("sent %.0f in a minute at %.0f/s with burst %d, want %.0f to %.0f", sent, r, burst, want-largest, want+float64(burst)+largest)
		}
	})
}
