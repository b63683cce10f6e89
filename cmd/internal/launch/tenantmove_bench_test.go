package launch_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
)

// BenchmarkTenantMove moves a hot tenant (one topic of 12 partitions,
// written at a paced SLUICE_TENANT_MOVE_MBPS, default 20 MB/s, by 6
// franz-go producers of 1 KiB records, round robin over the partitions,
// each keeping up to 8,192 in flight, and read by a consumer group) from
// its shared cell of three broker processes to a dedicated pool's cell of
// three more, while a second tenant on the shared cell produces one
// record at a time, about 50 a second. Every client knows only the shared
// cell's bootstrap addresses. SLUICE_TENANT_MOVE_MINAGE sets the hot
// tenant's clients' kgo.MetadataMinAge (franz-go's default is 5 s): how
// soon a client may refresh its metadata after a broker says the
// partition is no longer there. It reports the move's duration and its
// steps, the per-producer longest time without an acknowledgement during
// the move (p50, p99, max), the group's lag before and during, and the
// other tenant's produce latency before and during.
// SLUICE_TENANT_MOVE_DEST_DIR puts the destination cell's data in a
// directory there (a tmpfs stands in for the disks of machines of its
// own: on one machine both cells share one disk);
// SLUICE_TENANT_MOVE_MIRROR_RATE is the destination brokers' -mirror-rate
// (bytes a second each partition pulls; their default is 8 MiB/s), and
// SLUICE_TENANT_MOVE_RATE the move's own copy rate (bytes a second over
// all 12 partitions, api.MoveTenantRequest.BytesPerSec). One run whatever
// b.N (-benchtime 1x); about a minute and a half.
func BenchmarkTenantMove(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a control plane and six brokers in two cells")
	}
	const parts, producers, batch, recSize = 12, 6, 32, 1024
	mbps := 20.0
	if v := os.Getenv("SLUICE_TENANT_MOVE_MBPS"); v != "" {
		var err error
		if mbps, err = strconv.ParseFloat(v, 64); err != nil || mbps <= 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_MBPS %q: want megabytes a second", v)
		}
	}
	var minAge []kgo.Opt
	if v := os.Getenv("SLUICE_TENANT_MOVE_MINAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_MINAGE %q: want a duration", v)
		}
		minAge = append(minAge, kgo.MetadataMinAge(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := startProcCell(b, "tmbench", 3)
	op := c.cp.Operator
	// The plan's quotas (1 MB/s or so) would cap the tenant: lift them, so
	// the pace and the servers set the rate.
	if _, err := op.AdminSetQuotas(ctx, c.tenant.ID, api.Quotas{ProduceBytesPerSec: 1 << 40, ProduceMessagesPerSec: 1 << 30,
		FetchBytesPerSec: 1 << 40, MaxPartitions: 10_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 1 << 50,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 1 << 30, MaxRetentionMs: 365 * 24 * 3600 * 1000}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.tenant.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: "hot", Partitions: parts}); err != nil {
		b.Fatal(err)
	}
	other, err := launch.SignUp(ctx, c.cp, "tmbench-other", "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := other.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: "quiet", Partitions: 3}); err != nil {
		b.Fatal(err)
	}
	if v := os.Getenv("SLUICE_TENANT_MOVE_DEST_DIR"); v != "" {
		// The destination cell's data on another filesystem (a tmpfs such
		// as /dev/shm): one machine's stand-in for a cell on machines of
		// its own, whose fsyncs do not queue behind the source cell's.
		d, err := os.MkdirTemp(v, "tmbench-dcell-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		c.cellsDir = d
	}
	if v := os.Getenv("SLUICE_TENANT_MOVE_MIRROR_RATE"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_MIRROR_RATE %q: want bytes a second per partition", v)
		}
		c.cellArgs = []string{"-mirror-rate", v} // the destination's pullers
	}
	var moveRate int64
	if v := os.Getenv("SLUICE_TENANT_MOVE_RATE"); v != "" {
		var err error
		if moveRate, err = strconv.ParseInt(v, 10, 64); err != nil || moveRate < 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_RATE %q: want bytes a second over the move's partitions", v)
		}
	}
	c.addCell(ctx, "tmbench-dedicated", "dedicated", "tmbench-dcell", 3)

	var ackedN, polled, failed atomic.Int64 // the hot tenant's records
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex // guards ackTimes, otherLat and lags
	ackTimes := make([][]time.Time, producers)
	type lat struct {
		at time.Time
		d  time.Duration
	}
	var otherLat []lat
	val := make([]byte, recSize)
	interval := time.Duration(float64(time.Second) * batch * recSize * producers / (mbps * 1e6))
	for p := range producers {
		cl := c.kgo(append([]kgo.Opt{kgo.DefaultProduceTopic("hot"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(2 * time.Millisecond), kgo.MaxBufferedRecords(8192), kgo.RecordDeliveryTimeout(3 * time.Minute)}, minAge...)...)
		acked := func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				return
			}
			ackedN.Add(1)
			now := time.Now()
			mu.Lock()
			ackTimes[p] = append(ackTimes[p], now)
			mu.Unlock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Flush(context.Background())
			next := time.Now()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if d := time.Until(next); d > 0 {
					time.Sleep(d) // pacing to the target rate, not synchronisation
				}
				next = next.Add(interval)
				if behind := time.Since(next); behind > time.Second {
					next = time.Now() // the rate is out of reach: do not burst to catch up
				}
				for range batch { // blocks while MaxBufferedRecords are unacknowledged
					cl.Produce(ctx, &kgo.Record{Value: val}, acked)
				}
			}
		}()
	}
	g := c.kgo(append([]kgo.Opt{kgo.ConsumerGroup("hot-group"), kgo.ConsumeTopics("hot"), kgo.FetchMaxBytes(16 << 20)}, minAge...)...)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := g.PollFetches(pctx)
			pcancel()
			polled.Add(int64(fs.NumRecords()))
		}
	}()
	oc, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.SASL(plain.Auth{User: other.KeyID, Pass: other.Secret}.AsMechanism()),
		kgo.DefaultProduceTopic("quiet"), kgo.RecordDeliveryTimeout(3*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer oc.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if err := oc.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				continue
			}
			mu.Lock()
			otherLat = append(otherLat, lat{start, time.Since(start)})
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // pacing: about 50 produces a second
		}
	}()
	type lagSample struct {
		at  time.Time
		lag int64
	}
	var lags []lagSample
	wg.Add(1)
	go func() { // the group's lag, every 100 ms
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case at := <-tick.C:
				mu.Lock()
				lags = append(lags, lagSample{at, ackedN.Load() - polled.Load()})
				mu.Unlock()
			}
		}
	}()

	if err := launch.WaitFor(ctx, "traffic warmed up", time.Minute, func() error {
		if ackedN.Load() == 0 || polled.Load() == 0 {
			return fmt.Errorf("%d acknowledged, %d polled", ackedN.Load(), polled.Load())
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	waitUntil(ctx, time.Now().Add(10*time.Second))
	window := 20 * time.Second
	beforeFrom, ackedFrom := time.Now(), ackedN.Load()
	waitUntil(ctx, beforeFrom.Add(window))
	beforeTo, ackedBefore := time.Now(), ackedN.Load()

	b.ResetTimer()
	var mv api.TenantMove
	if err := launch.WaitFor(ctx, "the move starts", time.Minute, func() error {
		var err error
		mv, err = op.AdminMoveTenant(ctx, c.tenant.ID, api.MoveTenantRequest{Pool: "tmbench-dedicated", BytesPerSec: moveRate})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	var timeline []string
	last := ""
	nextLag := started
	// A mirror that cannot catch up with the rate never lets the move
	// leave mirroring: give up after limit, with the lag's course logged.
	limit := 3 * time.Minute
	if v := os.Getenv("SLUICE_TENANT_MOVE_LIMIT"); v != "" {
		if limit, err = time.ParseDuration(v); err != nil || limit <= 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_LIMIT %q: want a duration", v)
		}
	}
	if err := launch.WaitFor(ctx, "the tenant move is done", limit, func() error {
		m, err := op.AdminTenantMove(ctx, mv.ID)
		if err != nil {
			return err
		}
		if m.State != last {
			last = m.State
			timeline = append(timeline, fmt.Sprintf("%s %s", m.State, time.Since(started).Round(10*time.Millisecond)))
		}
		if time.Now().After(nextLag) {
			nextLag = nextLag.Add(15 * time.Second)
			var sum, most int64
			for _, p := range m.Partitions {
				if p.Lag != nil {
					sum += *p.Lag
					most = max(most, *p.Lag)
				}
			}
			b.Logf("at %s: %s, mirror lag %d offsets in all, %d at most; %d acknowledged", time.Since(started).Round(time.Second),
				m.State, sum, most, ackedN.Load())
		}
		if m.State != "done" {
			return fmt.Errorf("move %d is %s: %s", m.ID, m.State, m.Error)
		}
		mv = m
		return nil
	}); err != nil {
		b.Logf("produced %.1f MB/s in the %v before the move", float64(ackedBefore-ackedFrom)*recSize/1e6/beforeTo.Sub(beforeFrom).Seconds(), window)
		b.Fatal(err)
	}
	finished := time.Now()
	b.StopTimer()
	ackedDuring := ackedN.Load() - ackedBefore
	waitUntil(ctx, finished.Add(5*time.Second))
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration // each producer's longest time without an acknowledgement during the move
	for _, ts := range ackTimes {
		gaps = append(gaps, longestGap(ts, started, finished))
	}
	slices.Sort(gaps)
	var before, during []time.Duration
	var slowest []lat // during the move, at: since its start
	for _, l := range otherLat {
		switch {
		case !l.at.Before(beforeFrom) && l.at.Before(beforeTo):
			before = append(before, l.d)
		case !l.at.Before(started) && l.at.Before(finished):
			during = append(during, l.d)
			slowest = append(slowest, lat{at: time.Time{}.Add(l.at.Sub(started)), d: l.d})
		}
	}
	slices.SortFunc(slowest, func(a, b lat) int { return cmp.Compare(b.d, a.d) })
	var slow []string
	for _, l := range slowest[:min(len(slowest), 5)] {
		slow = append(slow, fmt.Sprintf("%v at +%v", l.d.Round(time.Millisecond), l.at.Sub(time.Time{}).Round(100*time.Millisecond)))
	}
	slices.Sort(before)
	slices.Sort(during)
	var lagBefore, lagDuring int64
	for _, s := range lags {
		switch {
		case !s.at.Before(beforeFrom) && s.at.Before(beforeTo):
			lagBefore = max(lagBefore, s.lag)
		case !s.at.Before(started) && s.at.Before(finished.Add(5*time.Second)):
			lagDuring = max(lagDuring, s.lag)
		}
	}
	dur := finished.Sub(started)
	mbBefore := float64(ackedBefore-ackedFrom) * recSize / 1e6 / beforeTo.Sub(beforeFrom).Seconds()
	mbDuring := float64(ackedDuring) * recSize / 1e6 / dur.Seconds()
	b.ReportMetric(dur.Seconds(), "move_s")
	b.ReportMetric(pct(gaps, 0.5).Seconds()*1e3, "gap_p50_ms")
	b.ReportMetric(pct(gaps, 0.99).Seconds()*1e3, "gap_p99_ms")
	b.ReportMetric(pct(gaps, 1).Seconds()*1e3, "gap_max_ms")
	b.ReportMetric(float64(lagBefore), "lag_before_recs")
	b.ReportMetric(float64(lagDuring), "lag_during_recs")
	b.ReportMetric(pct(before, 0.99).Seconds()*1e3, "other_p99_before_ms")
	b.ReportMetric(pct(during, 0.99).Seconds()*1e3, "other_p99_during_ms")
	b.ReportMetric(mbBefore, "MB/s_before")
	b.ReportMetric(mbDuring, "MB/s_during")
	b.Logf("target %.0f MB/s; produced %.1f MB/s in the %v before, %.1f MB/s during the move; %d records failed; MetadataMinAge %q",
		mbps, mbBefore, window, mbDuring, failed.Load(), os.Getenv("SLUICE_TENANT_MOVE_MINAGE"))
	b.Logf("move %d to %s at %d B/s (%d B/s a partition; 0: the brokers' -mirror-rate) in %v: %s", mv.ID, mv.DestCellID, mv.BytesPerSec,
		mv.PartitionBytesPerSec, dur.Round(10*time.Millisecond), strings.Join(timeline, ", "))
	b.Logf("per-producer longest time without an acknowledgement during the move (%d producers): %v", producers, gaps)
	b.Logf("group lag (records acknowledged, not yet polled): max %d before, max %d during the move and 5 s after", lagBefore, lagDuring)
	b.Logf("other tenant's produce latency: before p50 %v p99 %v (%d), during p50 %v p99 %v (%d)",
		pct(before, 0.5), pct(before, 0.99), len(before), pct(during, 0.5), pct(during, 0.99), len(during))
	b.Logf("other tenant's slowest produces during the move (sent, from the move's start): %s", strings.Join(slow, ", "))
}
