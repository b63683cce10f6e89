package launch_test

import (
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
	"github.com/sluicehq/sluice/contract/client"
)

// BenchmarkMoveTwelvePartitions moves all 12 partitions of a tenant's
// topic from brokers 1, 2, 3 to 4, 5, 6 of a cell of six real broker
// processes at once (the control plane allows one unfinished move per
// partition, so all 12), while the tenant produces at a paced rate
// (SLUICE_MOVE_BENCH_MBPS, default 20 MB/s, over 4 producers each
// keeping up to 8,192 records of 1 KiB in flight, round-robin over the
// partitions) and a consumer group reads
// the topic, and another tenant on the same brokers produces one record
// at a time. It reports the moves' total duration, the tenant's per-
// producer acknowledgement gaps during the moves (p99 and max), the
// group's lag (records acknowledged but not yet polled) before and during
// the moves, and the other tenant's produce p99 before and during. One
// run whatever b.N (-benchtime 1x); about two minutes.
func BenchmarkMoveTwelvePartitions(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a control plane and six brokers")
	}
	const parts, producers, batch, recSize = 12, 4, 32, 1024
	mbps := 20.0
	if v := os.Getenv("SLUICE_MOVE_BENCH_MBPS"); v != "" {
		var err error
		if mbps, err = strconv.ParseFloat(v, 64); err != nil || mbps <= 0 {
			b.Fatalf("SLUICE_MOVE_BENCH_MBPS %q: want megabytes a second", v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startProcCell(b, "movebench", 6)
	op := c.cp.Operator
	// Brokers 4, 5, 6 out of placement while the topics are created, so
	// every partition lands on 1, 2, 3.
	setStatus := func(st string) {
		for _, id := range []string{"b4", "b5", "b6"} {
			if _, err := op.AdminUpdateBroker(ctx, id, api.UpdateBrokerRequest{Status: &st}); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The plan's quotas (1 MB/s or so) would cap the tenant: lift them, so
	// the pace and the servers set the rate.
	if _, err := op.AdminSetQuotas(ctx, c.tenant.ID, api.Quotas{ProduceBytesPerSec: 1 << 40, ProduceMessagesPerSec: 1 << 30,
		FetchBytesPerSec: 1 << 40, MaxPartitions: 10_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 1 << 50,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 1 << 30, MaxRetentionMs: 365 * 24 * 3600 * 1000}); err != nil {
		b.Fatal(err)
	}
	setStatus("draining")
	if _, err := c.tenant.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: "hot", Partitions: parts}); err != nil {
		b.Fatal(err)
	}
	other, err := launch.SignUp(ctx, c.cp, "movebench-other", "")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := other.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: "quiet", Partitions: 3}); err != nil {
		b.Fatal(err)
	}
	setStatus("active")
	tp, err := c.tenant.Client.Topic(ctx, "hot")
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range tp.Assignments {
		if r := slices.Sorted(slices.Values(a.Replicas)); !slices.Equal(r, []int{1, 2, 3}) {
			b.Fatalf("partition %d is on %v, not 1, 2, 3", a.Partition, a.Replicas)
		}
	}
	topicID := c.topicID(ctx, "hot")

	var ackedN, polled atomic.Int64 // the hot tenant's records
	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex // guards ackTimes, hotLat and otherLat
	ackTimes := make([][]time.Time, producers)
	type lat struct {
		at time.Time
		d  time.Duration
	}
	var otherLat, hotLat []lat
	val := make([]byte, recSize)
	interval := time.Duration(float64(time.Second) * batch * recSize * producers / (mbps * 1e6))
	for p := range producers {
		cl := c.kgo(kgo.DefaultProduceTopic("hot"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(8192), kgo.RecordDeliveryTimeout(3*time.Minute))
		acked := func(sent time.Time) func(*kgo.Record, error) {
			return func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					return
				}
				ackedN.Add(1)
				now := time.Now()
				mu.Lock()
				ackTimes[p] = append(ackTimes[p], now)
				hotLat = append(hotLat, lat{sent, now.Sub(sent)})
				mu.Unlock()
			}
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
				sent := time.Now()
				for range batch { // blocks while MaxBufferedRecords are unacknowledged
					cl.Produce(ctx, &kgo.Record{Value: val}, acked(sent))
				}
			}
		}()
	}
	g := c.kgo(kgo.ConsumerGroup("hot-group"), kgo.ConsumeTopics("hot"), kgo.FetchMaxBytes(16<<20))
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

	// Warm up, then a window before the moves.
	warm := 10 * time.Second
	window := 20 * time.Second
	if err := launch.WaitFor(ctx, "traffic warmed up", time.Minute, func() error {
		if ackedN.Load() == 0 || polled.Load() == 0 {
			return fmt.Errorf("%d acknowledged, %d polled", ackedN.Load(), polled.Load())
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	waitUntil(ctx, t0.Add(warm))
	beforeFrom, ackedFrom := time.Now(), ackedN.Load()
	waitUntil(ctx, beforeFrom.Add(window))
	beforeTo, ackedBefore := time.Now(), ackedN.Load()

	b.ResetTimer()
	started := time.Now()
	var ids []int64
	for _, a := range tp.Assignments {
		target := make([]int, len(a.Replicas))
		for i, n := range a.Replicas {
			target[i] = n + 3
		}
		var mv api.Move
		// A broker's report may briefly lack a replica's Raft
		// configuration (unavailable): the next one has it.
		if err := launch.WaitFor(ctx, fmt.Sprintf("move of partition %d created", a.Partition), time.Minute, func() error {
			var err error
			if mv, err = op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: a.Partition, Replicas: target}); err != nil {
				if !client.IsCode(err, "unavailable") {
					b.Fatal(err)
				}
				b.Logf("move of partition %d refused, trying again: %v", a.Partition, err)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, mv.ID)
	}
	if err := launch.WaitFor(ctx, "all 12 moves completed", 8*time.Minute, func() error {
		ms, err := op.AdminMoves(ctx, client.MoveFilter{State: "completed"})
		if err != nil {
			return err
		}
		if len(ms) < len(ids) {
			return fmt.Errorf("%d of %d completed", len(ms), len(ids))
		}
		return nil
	}); err != nil {
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
	var gaps []time.Duration
	for _, ts := range ackTimes {
		last := started
		for _, at := range ts {
			if at.Before(started) {
				continue
			}
			if at.After(finished) {
				break
			}
			gaps = append(gaps, at.Sub(last))
			last = at
		}
		gaps = append(gaps, finished.Sub(last))
	}
	slices.Sort(gaps)
	var hot []time.Duration // the hot tenant's records sent during the moves: from send to acknowledgement
	for _, l := range hotLat {
		if !l.at.Before(started) && l.at.Before(finished) {
			hot = append(hot, l.d)
		}
	}
	slices.Sort(hot)
	var before, during []time.Duration
	for _, l := range otherLat {
		switch {
		case !l.at.Before(beforeFrom) && l.at.Before(beforeTo):
			before = append(before, l.d)
		case !l.at.Before(started) && l.at.Before(finished):
			during = append(during, l.d)
		}
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
	b.ReportMetric(pct(hot, 0.99).Seconds()*1e3, "produce_p99_ms")
	b.ReportMetric(pct(hot, 1).Seconds()*1e3, "produce_max_ms")
	b.ReportMetric(pct(gaps, 1).Seconds()*1e3, "ack_gap_max_ms")
	b.ReportMetric(float64(lagBefore), "lag_before_recs")
	b.ReportMetric(float64(lagDuring), "lag_during_recs")
	b.ReportMetric(pct(before, 0.99).Seconds()*1e3, "other_p99_before_ms")
	b.ReportMetric(pct(during, 0.99).Seconds()*1e3, "other_p99_during_ms")
	b.ReportMetric(mbBefore, "MB/s_before")
	b.ReportMetric(mbDuring, "MB/s_during")
	b.Logf("target %.0f MB/s; produced %.1f MB/s in the %v before, %.1f MB/s during the moves; %d records failed (retried by no one)",
		mbps, mbBefore, window, mbDuring, failed.Load())
	b.Logf("12 moves in %v; the tenant's records sent during the moves, send to acknowledgement: p50 %v p99 %v max %v (%d records); longest time any of the %d producers went without an acknowledgement %v",
		dur.Round(10*time.Millisecond), pct(hot, 0.5), pct(hot, 0.99), pct(hot, 1), len(hot), producers, pct(gaps, 1))
	b.Logf("group lag (records acknowledged, not yet polled): max %d before, max %d during the moves and 5 s after", lagBefore, lagDuring)
	b.Logf("other tenant's produce latency: before p50 %v p99 %v (%d), during p50 %v p99 %v (%d)",
		pct(before, 0.5), pct(before, 0.99), len(before), pct(during, 0.5), pct(during, 0.99), len(during))
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
