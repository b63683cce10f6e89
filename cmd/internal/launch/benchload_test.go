package launch_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
)

// benchLoad is the traffic the move benchmarks run while partitions or a
// whole tenant change cells under it: the cell's tenant's paced producers,
// round robin over the partitions of topic "hot", and a consumer group
// reading it; another tenant producing one record at a time to "quiet",
// about 50 a second; and the group's lag sampled every 100 ms.
type benchLoad struct {
	cfg                    benchLoadConfig
	ackedN, polled, failed atomic.Int64 // the hot tenant's records
	stop                   chan struct{}
	wg                     sync.WaitGroup
	// mu guards the fields below.
	mu               sync.Mutex
	ackTimes         [][]time.Time // per producer
	hotLat, otherLat []timedLatency
	lags             []lagSample
}

type benchLoadConfig struct {
	producers, batch, recSize int
	mbps                      float64   // the producers' pace, together
	opts                      []kgo.Opt // further options of the hot tenant's clients
}

// timedLatency is one record's time from send to acknowledgement, and when
// it was sent.
type timedLatency struct {
	at time.Time
	d  time.Duration
}

type lagSample struct {
	at  time.Time
	lag int64
}

// mbpsFromEnv is the megabytes a second set in the environment variable
// name, or def.
func mbpsFromEnv(b *testing.B, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	mbps, err := strconv.ParseFloat(v, 64)
	if err != nil || mbps <= 0 {
		b.Fatalf("%s %q: want megabytes a second", name, v)
	}
	return mbps
}

// liftQuotas raises the cell's tenant's quotas out of the way: the plan's
// (1 MB/s or so) would cap it, where the pace and the servers should set
// the rate.
func (c *procCell) liftQuotas(ctx context.Context) {
	c.t.Helper()
	if _, err := c.cp.Operator.AdminSetQuotas(ctx, c.tenant.ID, api.Quotas{ProduceBytesPerSec: 1 << 40, ProduceMessagesPerSec: 1 << 30,
		FetchBytesPerSec: 1 << 40, MaxPartitions: 10_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 1 << 50,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 1 << 30, MaxRetentionMs: 365 * 24 * 3600 * 1000}); err != nil {
		c.t.Fatal(err)
	}
}

// startBenchLoad starts the load; other is the tenant that produces to
// "quiet".
func (c *procCell) startBenchLoad(ctx context.Context, other *launch.Tenant, cfg benchLoadConfig) *benchLoad {
	c.t.Helper()
	l := &benchLoad{cfg: cfg, stop: make(chan struct{}), ackTimes: make([][]time.Time, cfg.producers)}
	interval := time.Duration(float64(time.Second) * float64(cfg.batch*cfg.recSize*cfg.producers) / (cfg.mbps * 1e6))
	for p := range cfg.producers {
		cl := c.kgo(append([]kgo.Opt{kgo.DefaultProduceTopic("hot"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(2 * time.Millisecond), kgo.MaxBufferedRecords(8192), kgo.RecordDeliveryTimeout(3 * time.Minute)}, cfg.opts...)...)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer cl.Flush(context.Background())
			l.producer(ctx, cl, p, interval)
		}()
	}
	g := c.kgo(append([]kgo.Opt{kgo.ConsumerGroup("hot-group"), kgo.ConsumeTopics("hot"), kgo.FetchMaxBytes(16 << 20)}, cfg.opts...)...)
	l.wg.Add(3)
	go l.consume(ctx, g)
	oc, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.SASL(plain.Auth{User: other.KeyID, Pass: other.Secret}.AsMechanism()),
		kgo.DefaultProduceTopic("quiet"), kgo.RecordDeliveryTimeout(3*time.Minute))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(oc.Close)
	go l.quiet(ctx, oc)
	go l.sampleLag()
	return l
}

func (l *benchLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// producer sends batches of records at its share of the pace until stop.
func (l *benchLoad) producer(ctx context.Context, cl *kgo.Client, p int, interval time.Duration) {
	val := make([]byte, l.cfg.recSize)
	acked := func(sent time.Time) func(*kgo.Record, error) {
		return func(_ *kgo.Record, err error) {
			if err != nil {
				l.failed.Add(1)
				return
			}
			l.ackedN.Add(1)
			now := time.Now()
			l.mu.Lock()
			l.ackTimes[p] = append(l.ackTimes[p], now)
			l.hotLat = append(l.hotLat, timedLatency{sent, now.Sub(sent)})
			l.mu.Unlock()
		}
	}
	next := time.Now()
	for !l.stopped() {
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing to the target rate, not synchronisation
		}
		next = next.Add(interval)
		if behind := time.Since(next); behind > time.Second {
			next = time.Now() // the rate is out of reach: do not burst to catch up
		}
		sent := time.Now()
		for range l.cfg.batch { // blocks while MaxBufferedRecords are unacknowledged
			cl.Produce(ctx, &kgo.Record{Value: val}, acked(sent))
		}
	}
}

func (l *benchLoad) consume(ctx context.Context, g *kgo.Client) {
	defer l.wg.Done()
	for !l.stopped() {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := g.PollFetches(pctx)
		pcancel()
		l.polled.Add(int64(fs.NumRecords()))
	}
}

func (l *benchLoad) quiet(ctx context.Context, oc *kgo.Client) {
	defer l.wg.Done()
	for i := 0; !l.stopped(); i++ {
		start := time.Now()
		if err := oc.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			continue
		}
		l.mu.Lock()
		l.otherLat = append(l.otherLat, timedLatency{start, time.Since(start)})
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // pacing: about 50 produces a second
	}
}

func (l *benchLoad) sampleLag() {
	defer l.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case at := <-tick.C:
			l.mu.Lock()
			l.lags = append(l.lags, lagSample{at, l.ackedN.Load() - l.polled.Load()})
			l.mu.Unlock()
		}
	}
}

// loadPhase is a stretch of the run, with the hot tenant's acknowledged
// records counted at each end.
type loadPhase struct {
	from, to           time.Time
	ackedFrom, ackedTo int64
}

func (p loadPhase) mbps(recSize int) float64 {
	return float64(p.ackedTo-p.ackedFrom) * float64(recSize) / 1e6 / p.to.Sub(p.from).Seconds()
}

// warmUp waits for traffic both ways, lets it run 10 s, then measures a
// 20 s window: the phase before the change.
func (l *benchLoad) warmUp(ctx context.Context, b *testing.B) loadPhase {
	if err := launch.WaitFor(ctx, "traffic warmed up", time.Minute, func() error {
		if l.ackedN.Load() == 0 || l.polled.Load() == 0 {
			return fmt.Errorf("%d acknowledged, %d polled", l.ackedN.Load(), l.polled.Load())
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	waitUntil(ctx, time.Now().Add(10*time.Second))
	before := loadPhase{from: time.Now(), ackedFrom: l.ackedN.Load()}
	waitUntil(ctx, before.from.Add(20*time.Second))
	before.to, before.ackedTo = time.Now(), l.ackedN.Load()
	return before
}

// loadSummary is what the load saw before and during the change; every
// slice of durations is sorted.
type loadSummary struct {
	before, during loadPhase
	// gaps is each producer's longest time without an acknowledgement
	// during the change.
	gaps []time.Duration
	// hot is the hot tenant's records sent during the change, from send
	// to acknowledgement.
	hot         []time.Duration
	otherBefore []time.Duration
	// otherDuring is the other tenant's produces sent during the change,
	// by latency (at: when sent).
	otherDuring          []timedLatency
	lagBefore, lagDuring int64 // the most records acknowledged and not yet polled
	failed               int64 // the hot tenant's records that failed (no one retries them)
}

// finish lets the load run 5 s past the change (started, now), stops it
// and sums it up.
func (l *benchLoad) finish(ctx context.Context, before loadPhase, started time.Time) loadSummary {
	s := loadSummary{before: before, during: loadPhase{from: started, to: time.Now(), ackedFrom: before.ackedTo, ackedTo: l.ackedN.Load()}}
	finished := s.during.to
	waitUntil(ctx, finished.Add(5*time.Second))
	close(l.stop)
	l.wg.Wait()
	s.failed = l.failed.Load()

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ts := range l.ackTimes {
		s.gaps = append(s.gaps, longestGap(ts, started, finished))
	}
	in := func(at, from, to time.Time) bool { return !at.Before(from) && at.Before(to) }
	for _, t := range l.hotLat {
		if in(t.at, started, finished) {
			s.hot = append(s.hot, t.d)
		}
	}
	for _, t := range l.otherLat {
		switch {
		case in(t.at, before.from, before.to):
			s.otherBefore = append(s.otherBefore, t.d)
		case in(t.at, started, finished):
			s.otherDuring = append(s.otherDuring, t)
		}
	}
	for _, x := range l.lags {
		switch {
		case in(x.at, before.from, before.to):
			s.lagBefore = max(s.lagBefore, x.lag)
		case in(x.at, started, finished.Add(5*time.Second)):
			s.lagDuring = max(s.lagDuring, x.lag)
		}
	}
	for _, ds := range [][]time.Duration{s.gaps, s.hot, s.otherBefore} {
		slices.Sort(ds)
	}
	slices.SortFunc(s.otherDuring, func(a, b timedLatency) int { return cmp.Compare(a.d, b.d) })
	return s
}

// otherDuringLatencies is otherDuring's latencies, sorted.
func (s loadSummary) otherDuringLatencies() []time.Duration {
	ds := make([]time.Duration, len(s.otherDuring))
	for i, t := range s.otherDuring {
		ds[i] = t.d
	}
	return ds
}

// report reports and logs what both benchmarks measure; what, the change
// ("the moves"), goes in the log lines.
func (s loadSummary) report(b *testing.B, cfg benchLoadConfig, what string) {
	b.ReportMetric(s.during.to.Sub(s.during.from).Seconds(), "move_s")
	b.ReportMetric(float64(s.lagBefore), "lag_before_recs")
	b.ReportMetric(float64(s.lagDuring), "lag_during_recs")
	b.ReportMetric(pct(s.otherBefore, 0.99).Seconds()*1e3, "other_p99_before_ms")
	during := s.otherDuringLatencies()
	b.ReportMetric(pct(during, 0.99).Seconds()*1e3, "other_p99_during_ms")
	b.ReportMetric(s.before.mbps(cfg.recSize), "MB/s_before")
	b.ReportMetric(s.during.mbps(cfg.recSize), "MB/s_during")
	b.Logf("target %.0f MB/s; produced %.1f MB/s in the %v before, %.1f MB/s during %s; %d records failed (retried by no one)",
		cfg.mbps, s.before.mbps(cfg.recSize), s.before.to.Sub(s.before.from).Round(time.Second), s.during.mbps(cfg.recSize), what, s.failed)
	b.Logf("group lag (records acknowledged, not yet polled): max %d before, max %d during %s and 5 s after", s.lagBefore, s.lagDuring, what)
	b.Logf("other tenant's produce latency: before p50 %v p99 %v (%d), during p50 %v p99 %v (%d)",
		pct(s.otherBefore, 0.5), pct(s.otherBefore, 0.99), len(s.otherBefore), pct(during, 0.5), pct(during, 0.99), len(during))
}

// pct is the q quantile of sorted ds (0 for none).
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(time.Millisecond)
}

// waitUntil returns at t or when ctx ends.
func waitUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}
