package quotashare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/quotas"
)

const redisAddr = "127.0.0.1:6379"

// newRedis returns a client for addr, closed at the end of the test.
func newRedis(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// prefix returns a key prefix no other test uses, and deletes its keys at
// the end of the test.
func prefix(t *testing.T) string {
	t.Helper()
	rdb := newRedis(t, redisAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		if testing.Short() {
			t.Skipf("no Redis on %s: %v", redisAddr, err)
		}
		t.Fatalf("redis on %s: %v", redisAddr, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	p := "sluice-test:quotashare:" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := rdb.Keys(ctx, "{"+p+"}:*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("clean up %s: %v", p, err)
		}
	})
	return p
}

type broker struct {
	id      string
	buckets *quotas.Buckets
	sharer  *Sharer
}

var brokerIDs = []string{"b1", "b2", "b3"}

func cellState(tenants ...wire.Tenant) wire.CellState {
	cs := wire.CellState{Version: wire.Version, Cell: "test", Tenants: tenants}
	for i, id := range brokerIDs {
		cs.Brokers = append(cs.Brokers, wire.Broker{ID: id, NodeID: i + 1})
	}
	return cs
}

func acme(produceBps int64) wire.Tenant {
	return wire.Tenant{ID: "acme", Status: "active", Quotas: wire.Quotas{ProduceBytesPerSec: produceBps, FetchBytesPerSec: 30e6}}
}

func newBroker(t *testing.T, id, pfx string, rdb redis.UniversalClient, clk *testkit.Clock, cs wire.CellState) *broker {
	t.Helper()
	b, err := quotas.New(quotas.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{
		Redis: rdb, Prefix: pfx, BrokerID: id, Buckets: b, Now: clk.Now,
		Logger: celltest.Logger(t, slog.LevelInfo),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.SetState(cs)
	return &broker{id: id, buckets: b, sharer: s}
}

func (b *broker) rate(t *testing.T, tenant string, k quotas.Kind) float64 {
	t.Helper()
	l, ok := b.buckets.Limits(tenant)
	if !ok {
		t.Fatalf("%s: tenant %s unknown", b.id, tenant)
	}
	return l[k].Rate
}

// window records a second of traffic on each broker (bytes/s given per
// broker) ending at the clock's next second, then runs one round on every
// broker in order.
func window(t *testing.T, clk *testkit.Clock, brokers []*broker, bps []float64) []error {
	t.Helper()
	start := clk.Now()
	for i, b := range brokers {
		for j := range 10 {
			b.buckets.Record("acme", quotas.ProduceBytes, int64(bps[i]/10), start.Add(time.Duration(j)*100*time.Millisecond))
		}
	}
	clk.Advance(time.Second)
	errs := make([]error, len(brokers))
	for i, b := range brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs[i] = b.sharer.Sync(ctx)
		cancel()
	}
	return errs
}

// newCell is the brokers of brokerIDs sharing acme's produce quota through
// one Redis prefix, on one scripted clock. A demandRounds above zero
// replaces each sharer's.
func newCell(t *testing.T, quota int64, demandRounds int) ([]*broker, *testkit.Clock) {
	t.Helper()
	pfx := prefix(t)
	rdb := newRedis(t, redisAddr)
	clk := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := cellState(acme(quota))
	var brokers []*broker
	for _, id := range brokerIDs {
		b := newBroker(t, id, pfx, rdb, clk, cs)
		if demandRounds > 0 {
			b.sharer.cfg.DemandRounds = demandRounds
		}
		brokers = append(brokers, b)
	}
	return brokers, clk
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestSharesFollowDemand(t *testing.T) {
	const quota = 15e6
	for _, tc := range []struct {
		name   string
		demand []float64
	}{
		{"skewed 80/10/10", []float64{12e6, 1.5e6, 1.5e6}},
		{"skewed above quota", []float64{40e6, 4e6, 1e6}},
		{"one broker busy", []float64{0, 9e6, 0}},
		{"all idle", []float64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers, clk := newCell(t, quota, 0)
			for _, b := range brokers {
				if got := b.rate(t, "acme", quotas.ProduceBytes); !near(got, quota/3) {
					t.Fatalf("%s starts at %v, want the even split %v", b.id, got, quota/3)
				}
			}
			// Two rounds: in the first, early brokers cannot yet see the
			// later ones' demand.
			for range 2 {
				for i, err := range window(t, clk, brokers, tc.demand) {
					if err != nil {
						t.Fatalf("%s: %v", brokers[i].id, err)
					}
				}
			}
			want := quotas.Split(quota, tc.demand, quotas.DefaultFloor, nil)
			var sum float64
			for i, b := range brokers {
				got := b.rate(t, "acme", quotas.ProduceBytes)
				sum += got
				if !near(got, want[i]) {
					t.Errorf("%s share %v, want %v", b.id, got, want[i])
				}
				if m := b.sharer.Mode(); m != ModeShared {
					t.Errorf("%s mode %v, want shared", b.id, m)
				}
				// Fetch had no demand anywhere: even split.
				if got := b.rate(t, "acme", quotas.FetchBytes); !near(got, 10e6) {
					t.Errorf("%s fetch share %v, want 10e6", b.id, got)
				}
			}
			if !near(sum, quota) {
				t.Errorf("shares sum to %v, want %v", sum, quota)
			}
		})
	}
}

func TestPublishedDemandExpires(t *testing.T) {
	pfx := prefix(t)
	rdb := newRedis(t, redisAddr)
	clk := testkit.NewClock(time.Now())
	b := newBroker(t, "b1", pfx, rdb, clk, cellState(acme(15e6)))
	if errs := window(t, clk, []*broker{b}, []float64{5e6}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ttl, err := rdb.PTTL(ctx, b.sharer.key("b1")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > 3*time.Second {
		t.Fatalf("published demand has TTL %v, want (0, 3s]", ttl)
	}
}

func TestFallbackWhenRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there any more
	clk := testkit.NewClock(time.Now())
	b := newBroker(t, "b1", "sluice-test:unreachable", newRedis(t, closed), clk, cellState(acme(15e6)))
	errs := window(t, clk, []*broker{b}, []float64{12e6})
	if errs[0] == nil {
		t.Fatal("Sync against a closed port succeeded")
	}
	if got := b.rate(t, "acme", quotas.ProduceBytes); !near(got, 5e6) {
		t.Errorf("fallback share %v, want the even split 5e6", got)
	}
	st := b.sharer.Stats()
	if st.Mode != ModeFallback || st.Rounds != 1 || st.FailedRounds != 1 || st.Fallbacks != 0 {
		t.Errorf("stats %+v, want fallback after 1 failed round and no change from shared", st)
	}
}

// proxy is a TCP proxy to Redis that the test stops and restarts on the
// same address, to cut the broker off from Redis and bring it back.
type proxy struct {
	t      *testing.T
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

func startProxy(t *testing.T) *proxy {
	// Started again on the same port after an outage: see LoopbackHost.
	p := &proxy{t: t, addr: net.JoinHostPort(celltest.LoopbackHost(), "0"), conns: map[net.Conn]struct{}{}}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr, p.closed = ln, ln.Addr().String(), false
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", redisAddr, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, up) {
				return
			}
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
				}()
			}
		}
	}()
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// stop closes the listener and every proxied connection and waits for the
// proxy's goroutines to exit.
func (p *proxy) stop() {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
}

func TestFallbackAndRecovery(t *testing.T) {
	const quota = 15e6
	pfx := prefix(t)
	px := startProxy(t)
	clk := testkit.NewClock(time.Now())
	cs := cellState(acme(quota))
	direct := newRedis(t, redisAddr)
	brokers := []*broker{
		newBroker(t, "b1", pfx, newRedis(t, px.addr), clk, cs), // the one cut off
		newBroker(t, "b2", pfx, direct, clk, cs),
		newBroker(t, "b3", pfx, direct, clk, cs),
	}
	demand := []float64{12e6, 1.5e6, 1.5e6}
	want := quotas.Split(quota, demand, quotas.DefaultFloor, nil)
	for _, step := range []struct {
		name  string
		do    func()
		err   bool
		mode  Mode
		share float64
		stats Stats
	}{
		{"shared", func() {}, false, ModeShared, want[0], Stats{Mode: ModeShared, Rounds: 2}},
		{"redis away", px.stop, true, ModeFallback, quota / 3, Stats{Mode: ModeFallback, Rounds: 4, FailedRounds: 2, Fallbacks: 1}},
		{"redis back", px.start, false, ModeShared, want[0], Stats{Mode: ModeShared, Rounds: 6, FailedRounds: 2, Fallbacks: 1}},
	} {
		step.do()
		for range 2 {
			errs := window(t, clk, brokers, demand)
			if (errs[0] != nil) != step.err {
				t.Fatalf("%s: b1 Sync error %v, want error %v", step.name, errs[0], step.err)
			}
			for _, err := range errs[1:] {
				if err != nil {
					t.Fatalf("%s: a broker with direct Redis failed: %v", step.name, err)
				}
			}
		}
		if got := brokers[0].rate(t, "acme", quotas.ProduceBytes); !near(got, step.share) {
			t.Errorf("%s: b1 share %v, want %v", step.name, got, step.share)
		}
		if got := brokers[0].sharer.Stats(); got != step.stats {
			t.Errorf("%s: b1 stats %+v, want %+v", step.name, got, step.stats)
		}
	}
}

func TestSetState(t *testing.T) {
	pfx := prefix(t)
	clk := testkit.NewClock(time.Now())
	b := newBroker(t, "b1", pfx, newRedis(t, redisAddr), clk, cellState(acme(15e6)))
	b2 := newBroker(t, "b2", pfx, newRedis(t, redisAddr), clk, cellState(acme(15e6)))
	b3 := newBroker(t, "b3", pfx, newRedis(t, redisAddr), clk, cellState(acme(15e6)))
	all := []*broker{b, b2, b3}
	for range 2 {
		window(t, clk, all, []float64{12e6, 1.5e6, 1.5e6})
	}
	before := b.rate(t, "acme", quotas.ProduceBytes)
	// The quota doubles: the broker keeps its proportion until the next round.
	globex := wire.Tenant{ID: "globex", Quotas: wire.Quotas{ProduceBytesPerSec: 3e6}}
	b.sharer.SetState(cellState(acme(30e6), globex))
	if got := b.rate(t, "acme", quotas.ProduceBytes); !near(got, 2*before) {
		t.Errorf("after the quota doubled: share %v, want %v", got, 2*before)
	}
	if got := b.rate(t, "globex", quotas.ProduceBytes); !near(got, 1e6) {
		t.Errorf("new tenant's share %v, want the even split 1e6", got)
	}
	// A tenant gone from the state is gone from the buckets.
	b.sharer.SetState(cellState(globex))
	if _, ok := b.buckets.Limits("acme"); ok {
		t.Error("removed tenant still has buckets")
	}
}

func TestRun(t *testing.T) {
	pfx := prefix(t)
	b, err := quotas.New(quotas.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Redis: newRedis(t, redisAddr), Prefix: pfx, BrokerID: "b1", Buckets: b, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.SetState(cellState(acme(15e6)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	celltest.WaitFor(t, 10*time.Second, "three rounds in shared mode", func() bool { st := s.Stats(); return st.Rounds >= 3 && st.Mode == ModeShared })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestConfig(t *testing.T) {
	b, _ := quotas.New(quotas.Config{})
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no redis", Config{Prefix: "p", BrokerID: "b", Buckets: b}},
		{"no prefix", Config{Redis: rdb, BrokerID: "b", Buckets: b}},
		{"no broker", Config{Redis: rdb, Prefix: "p", Buckets: b}},
		{"no buckets", Config{Redis: rdb, Prefix: "p", BrokerID: "b"}},
		{"floor above 1", Config{Redis: rdb, Prefix: "p", BrokerID: "b", Buckets: b, Floor: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
