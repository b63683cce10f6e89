package quotas

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Kind is what a bucket counts.
type Kind uint8

// The kinds of traffic a tenant is limited on.
const (
	ProduceBytes    Kind = iota // record batch bytes received in Produce
	ProduceMessages             // records received in Produce
	FetchBytes                  // record batch bytes sent in Fetch responses
	NumKinds        = 3
)

func (k Kind) String() string {
	switch k {
	case ProduceBytes:
		return "produce_bytes"
	case ProduceMessages:
		return "produce_messages"
	case FetchBytes:
		return "fetch_bytes"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Limit is one bucket's configuration.
type Limit struct {
	// Rate is the sustained rate in units per second. Zero or less means no
	// limit (the control plane never sends that; a broker that has not yet
	// learned a tenant's quota does not throttle it).
	Rate float64
	// Burst is how many units a tenant that has been idle long enough may
	// send without being throttled. Zero means Rate × Config.BurstWindow.
	// A single request larger than the burst is still admitted; see Record.
	Burst int
	// Repay, when above Rate, is the rate the throttle of a request that
	// found the bucket out of debt is computed at: the client is told to
	// wait until that debt would be repaid at Repay, and its next request,
	// which finds the rest still owed, waits for the whole debt at Rate.
	// So a client gets at most one request's worth beyond its rate per
	// stretch out of debt, and Rate over time. A broker's share of a
	// cell-wide quota sets it to the even share: a share that is small
	// because the broker saw no traffic lately would otherwise give the
	// first large batch a wait many times what the share the broker then
	// gets takes to repay it.
	Repay float64
}

// Limits are a tenant's limits on one broker, indexed by Kind.
type Limits [NumKinds]Limit

// Config configures Buckets. The zero value is valid; see each field for its
// default.
type Config struct {
	// BurstWindow derives a bucket's burst from its rate when Limit.Burst is
	// zero: burst = rate × BurstWindow. Default 500ms, which lets a client
	// that has been idle send half a second's worth at once while keeping a
	// flat-out client within a few percent of its rate over tens of seconds.
	BurstWindow time.Duration
	// MinBurst is the smallest derived burst, in the bucket's units.
	// Default 1.
	MinBurst int
	// MaxThrottle, when positive, caps the throttle Record returns; the
	// debt behind a longer throttle is kept, so the next request is
	// throttled again. Zero (the default) means no cap, which is what keeps
	// a client to its rate: with a cap, a client sending batches larger
	// than rate × MaxThrottle gets one batch per MaxThrottle. KIP-219
	// clients wait out any throttle without a timeout; a data plane that
	// must delay responses for older clients caps its own delay instead.
	MaxThrottle time.Duration
}

func (c *Config) validate() error {
	if c.BurstWindow < 0 || c.MinBurst < 0 || c.MaxThrottle < 0 {
		return errors.New("burst window, minimum burst and maximum throttle must not be negative")
	}
	if c.BurstWindow == 0 {
		c.BurstWindow = 500 * time.Millisecond
	}
	if c.MinBurst == 0 {
		c.MinBurst = 1
	}
	return nil
}

// Buckets holds the token buckets of every tenant served by one broker.
//
// It follows Kafka's record-then-check rule: Record always admits what it
// is given, takes it from the tenant's bucket even when that drives the
// bucket below zero (the debt), and returns how long the client must wait
// before its next request so that the debt is repaid at the tenant's rate.
// A client that waits as told therefore converges to the rate in the long
// run, whatever its request sizes.
//
// Buckets is safe for concurrent use; it never blocks other than on its own
// short critical sections.
type Buckets struct {
	cfg Config

	// mu guards the fields below.
	mu      sync.RWMutex
	tenants map[string]*tenant
}

type tenant struct {
	// mu guards the fields below.
	mu       sync.Mutex
	limits   Limits
	buckets  [NumKinds]*rate.Limiter // nil: unlimited
	last     time.Time               // latest time seen; earlier times are clamped to it
	recorded [NumKinds]float64       // units recorded since demandSince
	quiet    [NumKinds]time.Time     // when the latest throttle Record returned ends
	repay    [NumKinds]float64       // Limit.Repay
	since    time.Time
}

// New returns empty Buckets.
func New(cfg Config) (*Buckets, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("quotas config: %w", err)
	}
	return &Buckets{cfg: cfg, tenants: make(map[string]*tenant)}, nil
}

func (b *Buckets) burst(l Limit) int {
	if l.Burst > 0 {
		return l.Burst
	}
	v := l.Rate * b.cfg.BurstWindow.Seconds()
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(int(v), b.cfg.MinBurst)
}

// Set installs or changes a tenant's limits as of now. A changed rate
// applies from now on: debt owed at the old rate is kept and is repaid at
// the new one. A new tenant starts with full buckets. Lifting a limit
// (Rate ≤ 0) forgets that bucket's debt.
func (b *Buckets) Set(id string, l Limits, now time.Time) {
	b.mu.Lock()
	t := b.tenants[id]
	if t == nil {
		t = &tenant{last: now, since: now}
		b.tenants[id] = t
	}
	b.mu.Unlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	now = t.clamp(now)
	for k := range NumKinds {
		lim, want := t.buckets[k], l[k]
		t.repay[k] = want.Repay
		switch {
		case want.Rate <= 0:
			t.buckets[k] = nil
		case lim == nil:
			t.buckets[k] = rate.NewLimiter(rate.Limit(want.Rate), b.burst(want))
		default:
			lim.SetLimitAt(now, rate.Limit(want.Rate))
			lim.SetBurstAt(now, b.burst(want))
		}
	}
	t.limits = l
}

// Remove forgets a tenant.
func (b *Buckets) Remove(id string) {
	b.mu.Lock()
	delete(b.tenants, id)
	b.mu.Unlock()
}

// Limits returns a tenant's current limits, and false for an unknown tenant.
func (b *Buckets) Limits(id string) (Limits, bool) {
	t := b.tenant(id)
	if t == nil {
		return Limits{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limits, true
}

// Len is the number of tenants.
func (b *Buckets) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.tenants)
}

func (b *Buckets) tenant(id string) *tenant {
	b.mu.RLock()
	t := b.tenants[id]
	b.mu.RUnlock()
	return t
}

// clamp keeps a tenant's time from going backwards, which would credit the
// same interval twice when callers read the clock before taking the lock.
func (t *tenant) clamp(now time.Time) time.Time {
	if now.Before(t.last) {
		return t.last
	}
	t.last = now
	return now
}

// Record admits n units of kind for a tenant at now and returns how long the
// client must wait before sending its next request of that kind (Kafka's
// throttle_time_ms). The request itself is never refused: a batch larger
// than the burst drives the bucket into debt and the throttle covers the
// whole debt, which is the record-then-check behaviour of Kafka's quota
// manager. Unknown tenants and unlimited kinds are never throttled.
func (b *Buckets) Record(id string, kind Kind, n int64, now time.Time) time.Duration {
	t := b.tenant(id)
	if t == nil || kind >= NumKinds {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now = t.clamp(now)
	if n > 0 {
		t.recorded[kind] += float64(n)
	}
	lim := t.buckets[kind]
	if lim == nil {
		return 0
	}
	repay := 0.0
	if n > 0 {
		if lim.TokensAt(now) >= 0 {
			repay = t.repay[kind] // a request that finds no debt: see Limit.Repay
		}
		take(lim, n, now)
	}
	d := b.capped(throttle(lim, now, repay))
	if end := now.Add(d); d > 0 && end.After(t.quiet[kind]) {
		t.quiet[kind] = end
	}
	return d
}

// take removes n tokens from lim at now, going as far below zero as needed.
func take(lim *rate.Limiter, n int64, now time.Time) {
	n = min(n, math.MaxInt32)
	burst := lim.Burst()
	if int(n) <= burst {
		lim.ReserveN(now, int(n))
		return
	}
	// x/time/rate refuses any reservation larger than the burst, so a
	// 1 MiB batch could never pass a 64 KiB bucket. Widen the bucket for
	// this one reservation: advancing to now caps the balance at the old
	// burst, the reservation drives it negative by the excess, and
	// narrowing the burst back leaves a negative balance untouched.
	lim.SetBurstAt(now, int(n))
	lim.ReserveN(now, int(n))
	lim.SetBurstAt(now, burst)
}

// throttle is how long until lim's balance is back to zero, repaid at
// lim's rate or repay, whichever is higher.
func throttle(lim *rate.Limiter, now time.Time, repay float64) time.Duration {
	tokens := lim.TokensAt(now)
	if tokens >= 0 {
		return 0
	}
	d := -tokens / max(float64(lim.Limit()), repay) * float64(time.Second)
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(d))
}

func (b *Buckets) capped(d time.Duration) time.Duration {
	if b.cfg.MaxThrottle > 0 {
		return min(d, b.cfg.MaxThrottle)
	}
	return d
}

// Throttle is the wait Record would return for a request of zero units: how
// long until the tenant's debt of kind is repaid. A fetch uses it to answer
// empty with a throttle before reading any bytes.
func (b *Buckets) Throttle(id string, kind Kind, now time.Time) time.Duration {
	return b.Record(id, kind, 0, now)
}

// Debt is how many units of kind the tenant owes at now (zero when its
// bucket is not below zero).
func (b *Buckets) Debt(id string, kind Kind, now time.Time) float64 {
	t := b.tenant(id)
	if t == nil || kind >= NumKinds {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.buckets[kind]
	if lim == nil {
		return 0
	}
	return max(0, -lim.TokensAt(t.clamp(now)))
}

// Throttling reports whether the tenant's clients of kind are held back at
// now: its bucket is in debt, or a throttle Record returned has not ended
// yet. The second outlasts the first when the rate rose after the throttle
// was computed: the debt is repaid early, but the client still waits, and
// what it sent lately understates what it wants.
func (b *Buckets) Throttling(id string, kind Kind, now time.Time) bool {
	t := b.tenant(id)
	if t == nil || kind >= NumKinds {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.buckets[kind]
	if lim == nil {
		return false
	}
	now = t.clamp(now)
	return lim.TokensAt(now) < 0 || now.Before(t.quiet[kind])
}

// Demand is a tenant's recorded rates, in units per second, indexed by Kind.
type Demand [NumKinds]float64

// TakeDemand returns each tenant's recorded rate of every kind since the
// previous TakeDemand (or since the tenant was added, if later) and starts a
// new window at now. Recorded means everything passed to Record, throttled
// or not. The data plane publishes these so the cell can split quotas by
// demand.
func (b *Buckets) TakeDemand(now time.Time) map[string]Demand {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[string]Demand, len(b.tenants))
	for id, t := range b.tenants {
		t.mu.Lock()
		n := t.clamp(now)
		var d Demand
		if secs := n.Sub(t.since).Seconds(); secs > 0 {
			for k := range NumKinds {
				d[k] = t.recorded[k] / secs
			}
		}
		t.recorded = [NumKinds]float64{}
		t.since = n
		t.mu.Unlock()
		out[id] = d
	}
	return out
}
