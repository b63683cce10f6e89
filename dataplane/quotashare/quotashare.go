// Package quotashare splits each tenant's cell-wide quotas among the brokers
// of a cell by demand, through Redis. Every interval a broker publishes what
// each tenant sent it over the last window to a Redis hash of its own (with
// a TTL, so a dead broker's demand fades), reads the other brokers' hashes,
// and applies its share (quotas.Split) to its quotas.Buckets. When Redis
// cannot be reached it applies the even split (quota / brokers) and reports
// ModeFallback until a round succeeds again.
//
// It is the I/O half of the quotas core; the arithmetic lives in package
// quotas. Only tenantd and the data plane import it.
package quotashare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/quotas"
)

// Mode says where a broker's shares come from.
type Mode int32

const (
	// ModeFallback: the even split, because the last round could not reach
	// Redis or no round has completed yet.
	ModeFallback Mode = iota
	// ModeShared: shares by demand, from the last round.
	ModeShared
)

func (m Mode) String() string {
	if m == ModeShared {
		return "shared"
	}
	return "fallback"
}

// Config configures a Sharer.
type Config struct {
	// Redis is the cell's shared store. Required.
	Redis redis.UniversalClient
	// Prefix starts every key the Sharer writes, e.g. "sluice:cell:eu1".
	// Required; brokers of one cell must use the same prefix.
	Prefix string
	// BrokerID is this broker's id in the cell state. Required.
	BrokerID string
	// Buckets receives this broker's shares. Required.
	Buckets *quotas.Buckets
	// Interval between rounds in Run. Default 1s.
	Interval time.Duration
	// TTL of a broker's published demand. Default 3 × Interval.
	TTL time.Duration
	// Timeout bounds one round's Redis round trip. Default Interval / 2.
	Timeout time.Duration
	// Floor is passed to quotas.Split. Default quotas.DefaultFloor.
	Floor float64
	// DemandRounds is how many rounds each published demand averages
	// over (time-weighted). Default 1: the last round only. A broker
	// whose clients send large batches at a low rate records demand in
	// lumps; averaging over a few rounds keeps its share from swinging
	// between the floor and several times its rate.
	DemandRounds int
	// ThrottledBoost multiplies the demand a broker publishes for a
	// tenant's kind while that tenant's bucket is in debt (the broker is
	// throttling it, so its clients would send more than it admitted);
	// the demand is then at least the broker's current share.
	// Default 1: publish what was admitted. Above 1, a broker whose share
	// binds takes share from brokers whose clients use less than theirs
	// within a few rounds, instead of only through the floor.
	ThrottledBoost float64
	// Logger gets mode changes. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	switch {
	case c.Redis == nil:
		return errors.New("a Redis client is required")
	case c.Prefix == "":
		return errors.New("a key prefix is required")
	case c.BrokerID == "":
		return errors.New("a broker id is required")
	case c.Buckets == nil:
		return errors.New("buckets are required")
	case c.Interval < 0 || c.TTL < 0 || c.Timeout < 0:
		return errors.New("interval, TTL and timeout must not be negative")
	case c.ThrottledBoost < 0:
		return errors.New("throttled boost must not be negative")
	case c.DemandRounds < 0:
		return errors.New("demand rounds must not be negative")
	case c.Floor < 0 || c.Floor > 1:
		return fmt.Errorf("floor must be between 0 and 1, got %v", c.Floor)
	}
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.TTL = cmp.Or(c.TTL, 3*c.Interval)
	c.Timeout = cmp.Or(c.Timeout, c.Interval/2)
	c.Floor = cmp.Or(c.Floor, quotas.DefaultFloor)
	c.DemandRounds = cmp.Or(c.DemandRounds, 1)
	c.ThrottledBoost = cmp.Or(c.ThrottledBoost, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Stats are counters for metrics; they only grow, except Mode.
type Stats struct {
	Mode         Mode
	Rounds       uint64 // rounds attempted
	FailedRounds uint64 // rounds that fell back to the even split
	Fallbacks    uint64 // changes from ModeShared to ModeFallback
}

// Sharer runs the rounds of one broker. Sync and Run may be called from one
// goroutine at a time; SetState, Mode and Stats from any.
type Sharer struct {
	cfg Config

	// round serializes rounds.
	round sync.Mutex

	// past is the local demand of the last DemandRounds rounds, oldest
	// first; guarded by round.
	past []pastDemand

	// mu guards the fields below.
	mu      sync.Mutex
	brokers []string // the cell's broker ids, sorted, including this one
	self    int      // index of BrokerID in brokers
	tenants map[string]*tenant
	stats   Stats
}

type pastDemand struct {
	demand map[string]quotas.Demand
	secs   float64
	at     time.Time
}

type tenant struct {
	quota    [quotas.NumKinds]float64 // cell-wide
	fraction [quotas.NumKinds]float64 // this broker's share / quota
}

// New returns a Sharer in ModeFallback with no tenants; call SetState.
func New(cfg Config) (*Sharer, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("quota sharing config: %w", err)
	}
	s := &Sharer{cfg: cfg, tenants: make(map[string]*tenant)}
	s.setBrokers(nil)
	return s, nil
}

// key is a broker's demand hash. The braces make every key of a cell hash to
// one Redis Cluster slot, which the MULTI/EXEC round needs.
func (s *Sharer) key(broker string) string {
	return "{" + s.cfg.Prefix + "}:quota-demand:v1:" + broker
}

// setBrokers installs the cell's broker ids (adding this broker if the state
// does not list it yet). s.mu must be held or s not yet shared.
func (s *Sharer) setBrokers(ids []string) {
	ids = slices.Clone(ids)
	if !slices.Contains(ids, s.cfg.BrokerID) {
		ids = append(ids, s.cfg.BrokerID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.brokers = ids
	s.self = slices.Index(ids, s.cfg.BrokerID)
}

// SetState installs the cell's brokers and tenants' quotas from new wire
// state and applies them at once: a new tenant gets the even split, a
// changed quota keeps the tenant's current proportion of it, and a tenant
// gone from the state is removed from the buckets.
func (s *Sharer) SetState(cs wire.CellState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(cs.Brokers))
	for _, b := range cs.Brokers {
		ids = append(ids, b.ID)
	}
	s.setBrokers(ids)
	now := s.cfg.Now()
	seen := make(map[string]bool, len(cs.Tenants))
	for _, wt := range cs.Tenants {
		seen[wt.ID] = true
		l := limitsFromWire(wt.Quotas)
		t := s.tenants[wt.ID]
		if t == nil {
			t = &tenant{}
			for k := range quotas.NumKinds {
				t.fraction[k] = 1 / float64(len(s.brokers))
			}
			s.tenants[wt.ID] = t
		}
		for k := range quotas.NumKinds {
			t.quota[k] = l[k].Rate
		}
		s.apply(wt.ID, t, now)
	}
	for id := range s.tenants {
		if !seen[id] {
			delete(s.tenants, id)
			s.cfg.Buckets.Remove(id)
		}
	}
}

// apply sets the tenant's buckets to fraction × quota, with throttles
// computed at no less than the even share (quotas.Limit.Repay). s.mu must
// be held.
func (s *Sharer) apply(id string, t *tenant, now time.Time) {
	var l quotas.Limits
	for k := range quotas.NumKinds {
		l[k].Rate = t.quota[k] * t.fraction[k]
		l[k].Repay = t.quota[k] / float64(max(len(s.brokers), 1))
		if t.quota[k] <= 0 {
			l[k].Rate, l[k].Repay = 0, 0 // no limit
		}
	}
	s.cfg.Buckets.Set(id, l, now)
}

// Mode is where the current shares come from.
func (s *Sharer) Mode() Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Mode
}

// Stats returns the counters.
func (s *Sharer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Run calls Sync every Interval until ctx is done, then returns nil. A
// failed round is logged at its mode change and retried next interval.
func (s *Sharer) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			_ = s.Sync(ctx) // Sync logs mode changes; the next round retries
		}
	}
}

// Sync runs one round: publish this broker's demand since the previous
// round, read the other brokers', and apply this broker's shares. If Redis
// cannot be reached within Timeout it applies the even split, switches to
// ModeFallback and returns the error.
func (s *Sharer) Sync(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()

	now := s.cfg.Now()
	local := s.smooth(s.cfg.Buckets.TakeDemand(now), now)
	local = s.boost(local, now)
	s.mu.Lock()
	brokers, self := slices.Clone(s.brokers), s.self
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	others, err := s.exchange(ctx, brokers, self, local)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Rounds++
	if err != nil {
		s.stats.FailedRounds++
		if s.stats.Mode == ModeShared {
			s.stats.Fallbacks++
			s.cfg.Logger.Warn("quota sharing falls back to even split", "broker_id", s.cfg.BrokerID, "err", err)
		}
		s.stats.Mode = ModeFallback
	} else if s.stats.Mode != ModeShared {
		s.stats.Mode = ModeShared
		s.cfg.Logger.Info("quota sharing by demand", "broker_id", s.cfg.BrokerID, "brokers", len(brokers))
	}

	// Shares are computed for the broker list the exchange used; a state
	// change since then is applied from the next round on.
	n := len(brokers)
	demand := make([]float64, n)
	shares := make([]float64, n)
	now = s.cfg.Now()
	for id, t := range s.tenants {
		for k := range quotas.NumKinds {
			if t.quota[k] <= 0 {
				continue
			}
			if err != nil {
				t.fraction[k] = 1 / float64(n)
				continue
			}
			for i := range demand {
				demand[i] = others[i][id][k]
			}
			demand[self] = local[id][k]
			shares = quotas.Split(t.quota[k], demand, s.cfg.Floor, shares)
			t.fraction[k] = shares[self] / t.quota[k]
		}
		s.apply(id, t, now)
	}
	if err != nil {
		return fmt.Errorf("share quotas through redis: %w", err)
	}
	return nil
}

// exchange writes this broker's demand and reads every broker's, in one
// MULTI/EXEC round trip. others[i] is broker i's published demand by tenant
// (others[self] is left empty).
func (s *Sharer) exchange(ctx context.Context, brokers []string, self int, local map[string]quotas.Demand) ([]map[string]quotas.Demand, error) {
	fields := make([]any, 0, 2*len(local))
	for id, d := range local {
		if d == (quotas.Demand{}) {
			continue
		}
		fields = append(fields, id, encode(d))
	}
	own := s.key(brokers[self])
	reads := make([]*redis.MapStringStringCmd, len(brokers))
	_, err := s.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, own)
		if len(fields) > 0 {
			p.HSet(ctx, own, fields...)
			p.PExpire(ctx, own, s.cfg.TTL)
		}
		for i, b := range brokers {
			if i != self {
				reads[i] = p.HGetAll(ctx, s.key(b))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	others := make([]map[string]quotas.Demand, len(brokers))
	for i, r := range reads {
		if r == nil {
			continue
		}
		m := make(map[string]quotas.Demand, len(r.Val()))
		for id, v := range r.Val() {
			if d, ok := decode(v); ok {
				m[id] = d
			}
		}
		others[i] = m
	}
	return others, nil
}

// limitsFromWire maps a tenant's cell-wide wire quotas onto quotas.Limits
// (bursts derived from the rates).
func limitsFromWire(q wire.Quotas) quotas.Limits {
	var l quotas.Limits
	l[quotas.ProduceBytes].Rate = float64(q.ProduceBytesPerSec)
	l[quotas.ProduceMessages].Rate = float64(q.ProduceMessagesPerSec)
	l[quotas.FetchBytes].Rate = float64(q.FetchBytesPerSec)
	return l
}

// encode writes a tenant's demand as space-separated rates in Kind order;
// the key carries the format's version (v1).
func encode(d quotas.Demand) string {
	var b []byte
	for k, v := range d {
		if k > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return string(b)
}

func decode(s string) (quotas.Demand, bool) {
	var d quotas.Demand
	parts := strings.Fields(s)
	if len(parts) != quotas.NumKinds {
		return d, false
	}
	for k, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		// NaN and ±Inf parse too; one of them would poison every share.
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return quotas.Demand{}, false
		}
		d[k] = v
	}
	return d, true
}

// smooth records this round's local demand and returns the time-weighted
// average over the last DemandRounds rounds. s.round must be held.
func (s *Sharer) smooth(d map[string]quotas.Demand, now time.Time) map[string]quotas.Demand {
	if s.cfg.DemandRounds <= 1 {
		return d
	}
	secs := 0.0
	if n := len(s.past); n > 0 {
		secs = now.Sub(s.past[n-1].at).Seconds()
	}
	if secs <= 0 {
		secs = s.cfg.Interval.Seconds()
	}
	s.past = append(s.past, pastDemand{demand: d, secs: secs, at: now})
	if len(s.past) > s.cfg.DemandRounds {
		s.past = s.past[len(s.past)-s.cfg.DemandRounds:]
	}
	var total float64
	out := make(map[string]quotas.Demand, len(d))
	for _, p := range s.past {
		total += p.secs
		for id, dd := range p.demand {
			o := out[id]
			for k := range o {
				o[k] += dd[k] * p.secs
			}
			out[id] = o
		}
	}
	for id, o := range out {
		for k := range o {
			o[k] /= total
		}
		out[id] = o
	}
	return out
}

// boost raises the demand of every tenant's kind that is throttling at
// now (quotas.Buckets.Throttling: in debt, or a client still waiting out
// a throttle) to ThrottledBoost × the larger of its admitted rate and its
// current share. A throttled client is muted, so it sent little in the
// window; without the share as a lower bound its broker's share would
// shrink exactly when its clients want more.
func (s *Sharer) boost(local map[string]quotas.Demand, now time.Time) map[string]quotas.Demand {
	if s.cfg.ThrottledBoost == 1 {
		return local
	}
	for id, d := range local {
		l, _ := s.cfg.Buckets.Limits(id)
		for k := range quotas.NumKinds {
			if s.cfg.Buckets.Throttling(id, quotas.Kind(k), now) {
				d[k] = max(d[k], l[k].Rate) * s.cfg.ThrottledBoost
			}
		}
		local[id] = d
	}
	return local
}
