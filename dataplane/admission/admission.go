// Package admission is a broker's tenant isolation: it decides, for every
// produce and fetch a front door (the Kafka listener, the HTTP data API)
// serves, whether it may go ahead and how long the client must then wait.
// It drives the deterministic core in package quotas with the broker's
// clock, disk and cell state:
//
//   - throughput: per-tenant produce bytes/s, produce messages/s and fetch
//     bytes/s buckets (quotas.Buckets), whose rates dataplane/quotashare
//     keeps at this broker's share of the tenant's cell-wide quota;
//   - fair egress: fetch response bytes pass a deficit-round-robin
//     scheduler over tenants, weighted by plan, paced at the broker's
//     egress budget (contention is demand above that budget);
//   - disk watermarks: above soft the heaviest writers are throttled first,
//     above hard produce is refused with a retriable error naming the
//     broker, its usage and the watermark;
//   - per-tenant limits: connections to this broker, request rate, message
//     size and stored bytes.
//
// Record-then-throttle is the rule for rates (Kafka's): a request that was
// admitted is recorded in full and the returned throttle repays the debt.
// Refusals are *Refusal errors carrying a catalogue error, so the Kafka
// listener maps them to error codes and the HTTP API to a status and
// Retry-After.
//
// tenantd and the front doors import it; it imports only the quotas core,
// the data plane's state and the control plane's catalogue and wire types.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/quotas"
)

// DiskUsage reports the used and total bytes of the broker's data disk.
// Production uses cellview.DiskUsage on the data dir; tests inject their own.
type DiskUsage func() (used, total int64, err error)

// StorageUsage reports the bytes each tenant stores on this broker (the
// sum of its partitions' replica sizes), by tenant id.
type StorageUsage func() map[string]int64

// ShareMode reports where the throughput shares come from: true when
// shared by demand through Redis, false under the even-split fallback.
type ShareMode func() bool

// Config configures an Admission. Only Buckets is required.
type Config struct {
	// BrokerID names this broker in refusal messages and logs.
	BrokerID string
	// Buckets are the broker's per-tenant throughput buckets; the quota
	// sharer sets their rates. Required.
	Buckets *quotas.Buckets
	// Disk, when set, is polled every Every against Watermarks. Unset, no
	// watermarks apply.
	Disk DiskUsage
	// Watermarks are the disk thresholds (default soft 80%, hard 90%).
	Watermarks quotas.WatermarkConfig
	// Storage, when set, is polled every Every; a tenant at or above its
	// max_storage_bytes is refused produce. Unset, storage is not limited.
	Storage StorageUsage
	// Every is how often disk and storage are polled. Default 1s.
	Every time.Duration
	// EgressBytesPerSec is the broker's fetch egress budget: fetch
	// responses beyond it wait their tenant's turn (deficit round robin,
	// weighted by plan). Zero means no budget: responses never wait.
	EgressBytesPerSec float64
	// EgressQuantum is the DRR quantum in bytes for a weight-1 tenant.
	// Default 64 KiB.
	EgressQuantum int64
	// SoftThrottle is the least throttle given to the heaviest writers
	// after each produce while the disk is above its soft watermark.
	// Default 200ms.
	SoftThrottle time.Duration
	// SoftFraction: above soft, the heaviest writers whose write rates add
	// up to this fraction of all writes are throttled. Default 0.5.
	SoftFraction float64
	// MaxThrottle caps a single throttle (a mute or a delayed response);
	// the debt behind a longer one is kept. Default 30s.
	MaxThrottle time.Duration
	// ShareMode, when set, is exported as the sluice_quota_share_mode
	// metric.
	ShareMode ShareMode
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Buckets == nil {
		return errors.New("admission config: Buckets are required")
	}
	if c.Every < 0 || c.EgressBytesPerSec < 0 || c.EgressQuantum < 0 || c.SoftThrottle < 0 || c.MaxThrottle < 0 {
		return errors.New("admission config: intervals, budgets and throttles must not be negative")
	}
	if c.SoftFraction < 0 || c.SoftFraction > 1 {
		return fmt.Errorf("admission config: SoftFraction must be between 0 and 1, got %v", c.SoftFraction)
	}
	c.Every = cmp.Or(c.Every, time.Second)
	c.EgressQuantum = cmp.Or(c.EgressQuantum, 64<<10)
	c.SoftThrottle = cmp.Or(c.SoftThrottle, 200*time.Millisecond)
	c.SoftFraction = cmp.Or(c.SoftFraction, 0.5)
	c.MaxThrottle = cmp.Or(c.MaxThrottle, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Admission is one broker's admission control. Its methods are safe for
// concurrent use; Run owns the disk and storage polling and the egress
// scheduler.
type Admission struct {
	cfg     Config
	wm      *quotas.Watermarks // owned by Run (poll); published through disk
	disk    atomic.Pointer[diskStatus]
	egress  *egress
	metrics *metrics

	// mu guards the fields below.
	mu      sync.Mutex
	tenants map[string]*tenant
	brokers int // brokers in the cell, at least 1
	heavy   map[string]bool
}

// tenant is what Admission keeps per tenant besides its buckets.
type tenant struct {
	limits   wire.Quotas
	weight   int
	conns    int
	requests *rate.Limiter // nil: unlimited
	stored   int64         // bytes on this broker, as last polled
	written  int64         // produce bytes since the last poll
}

// diskStatus is the disk as last polled.
type diskStatus struct {
	state       quotas.DiskState
	used, total int64
	refusal     error // the *quotas.DiskFullError in DiskHard
}

// New checks cfg and returns an Admission with no tenants; call SetState.
func New(cfg Config) (*Admission, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	wm, err := quotas.NewWatermarks(cfg.Watermarks)
	if err != nil {
		return nil, fmt.Errorf("admission config: %w", err)
	}
	a := &Admission{cfg: cfg, wm: wm, tenants: map[string]*tenant{}, brokers: 1, heavy: map[string]bool{}}
	a.disk.Store(&diskStatus{})
	a.egress = newEgress(cfg.EgressBytesPerSec, cfg.EgressQuantum, cfg.Now)
	a.metrics = newMetrics(a, cfg.Registerer)
	return a, nil
}

// SetState installs the tenants' limits and plans from the cell state.
// Throughput rates are not set here: the quota sharer owns the buckets'
// rates.
func (a *Admission) SetState(cs wire.CellState) {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.brokers = max(len(cs.Brokers), 1)
	seen := make(map[string]bool, len(cs.Tenants))
	for _, wt := range cs.Tenants {
		seen[wt.ID] = true
		t := a.tenants[wt.ID]
		if t == nil {
			t = &tenant{}
			a.tenants[wt.ID] = t
		}
		t.limits = wt.Quotas
		t.weight = PlanWeight(wt.Plan)
		a.egress.setWeight(wt.ID, t.weight)
		// The request rate is a cell-wide quota; each broker enforces
		// an even share (requests are not shared by demand).
		if r := float64(wt.Quotas.MaxRequestsPerSec) / float64(a.brokers); r > 0 {
			burst := max(int(math.Ceil(r)), 1)
			if t.requests == nil {
				t.requests = rate.NewLimiter(rate.Limit(r), burst)
			} else {
				t.requests.SetLimitAt(now, rate.Limit(r))
				t.requests.SetBurstAt(now, burst)
			}
		} else {
			t.requests = nil
		}
	}
	for id := range a.tenants {
		if !seen[id] {
			delete(a.tenants, id)
			a.egress.remove(id)
		}
	}
}

// PlanWeight is a plan's weight in fair egress: how many times a free
// tenant's share of fetch bytes it gets under contention.
func PlanWeight(plan string) int {
	switch plan {
	case "standard":
		return 4
	case "dedicated":
		return 16
	}
	return 1
}

// Run polls the disk and storage and schedules egress until ctx ends; it
// returns nil then.
func (a *Admission) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.egress.run(ctx)
	}()
	defer wg.Wait()
	t := time.NewTicker(a.cfg.Every)
	defer t.Stop()
	last := a.cfg.Now()
	for {
		now := a.cfg.Now()
		a.poll(now.Sub(last))
		last = now
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll runs one round of disk and storage polling now, as Run does every
// interval. Tests call it to see an injected disk usage at once.
func (a *Admission) Poll() { a.poll(a.cfg.Every) }

// poll reads the disk and the tenants' storage, updates the watermark
// state and picks the heaviest writers from the produce bytes since the
// last poll, dt ago.
func (a *Admission) poll(dt time.Duration) {
	if a.cfg.Disk != nil {
		used, total, err := a.cfg.Disk()
		if err != nil {
			a.cfg.Logger.Warn("read disk usage", "err", err)
		} else {
			prev := a.wm.State()
			st := a.wm.Update(used, total)
			ds := &diskStatus{state: st, used: used, total: total}
			if err := a.wm.AdmitProduce(); err != nil {
				ds.refusal = err
			}
			a.disk.Store(ds)
			a.metrics.disk(ds)
			if st != prev {
				a.cfg.Logger.Warn("disk watermark state changed", "broker_id", a.cfg.BrokerID, "from", prev.String(), "to", st.String(),
					"used_bytes", used, "total_bytes", total)
			}
		}
	}
	var stored map[string]int64
	if a.cfg.Storage != nil {
		stored = a.cfg.Storage()
	}
	secs := max(dt.Seconds(), 1e-3)
	a.mu.Lock()
	defer a.mu.Unlock()
	rates := make(map[string]float64, len(a.tenants))
	for id, t := range a.tenants {
		if stored != nil {
			t.stored = stored[id]
		}
		rates[id] = float64(t.written) / secs
		t.written = 0
	}
	clear(a.heavy)
	if a.disk.Load().state != quotas.DiskOK {
		for _, id := range quotas.HeaviestWriters(rates, a.cfg.SoftFraction) {
			a.heavy[id] = true
		}
	}
}

// DiskState is the disk's state as last polled.
func (a *Admission) DiskState() quotas.DiskState { return a.disk.Load().state }

// DiskUsed is the disk's used and total bytes as last polled.
func (a *Admission) DiskUsed() (used, total int64) {
	d := a.disk.Load()
	return d.used, d.total
}

func (a *Admission) capped(d time.Duration) time.Duration {
	return min(max(d, 0), a.cfg.MaxThrottle)
}

// FollowState applies the syncer's view to a, and to each of also (such as
// a quota sharer's SetState), now and at every change, until ctx ends.
func (a *Admission) FollowState(ctx context.Context, s *cellview.Syncer, also ...func(wire.CellState)) {
	for {
		changed := s.Changed()
		v := s.View()
		a.SetState(v.CellState)
		for _, f := range also {
			f(v.CellState)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
