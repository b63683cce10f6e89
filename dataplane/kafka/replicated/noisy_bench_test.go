package replicated

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// Noisy-neighbour workload (docs/benchmarks.md). Tenant A's quotas are
// 1 MB/s produce and 2 MB/s fetch; tenant B's 4 MB/s produce and 2 MB/s
// fetch. B produces 1 KiB records at a steady 2 MB/s (half its quota) and
// then reads everything in its topic back from the start; A, when present,
// offers 10 MB/s of produce (10× its quota) and reads its own topic flat
// out. Each tenant has three partitions, one led by each broker; every
// broker's fetch egress budget is 16 MB/s (fair egress, DRR).
const (
	noisyAProduce   = 1_000_000
	noisyAFetch     = 2_000_000
	noisyBProduce   = 4_000_000
	noisyBFetch     = 2_000_000
	noisyBOffered   = 2_000_000
	noisyAOffered   = 10 * noisyAProduce
	noisyEgress     = 16_000_000
	noisyProduceFor = 10 * time.Second
)

// BenchmarkNoisyNeighbour measures tenant B's produce latency (p50, p99)
// and fetch throughput alone ("solo") and while tenant A offers ten times
// its quota ("noisy"), on one replicated cell. Run it once:
//
//	go test -run '^$' -bench NoisyNeighbour -benchtime 1x ./dataplane/kafka/replicated/
func BenchmarkNoisyNeighbour(b *testing.B) {
	rs := startRedis(b)
	qc := startQuotaCellGroups(b, rs.addr(), 3, 6, "a-events", noisyEgress)
	a := qc.tn
	qc.setQuotas(b, a.Tenant.ID, func(q *api.Quotas) {
		q.ProduceBytesPerSec, q.FetchBytesPerSec, q.ProduceMessagesPerSec, q.MaxRequestsPerSec = noisyAProduce, noisyAFetch, 1_000_000, 100_000
	})
	bt := qc.cp.Signup("beta", "admin")
	qc.setQuotas(b, bt.Tenant.ID, func(q *api.Quotas) {
		q.ProduceBytesPerSec, q.FetchBytesPerSec, q.ProduceMessagesPerSec, q.MaxRequestsPerSec = noisyBProduce, noisyBFetch, 1_000_000, 100_000
	})
	if _, err := bt.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: "b-events", Partitions: 3}); err != nil {
		b.Fatal(err)
	}
	celltest.WaitFor(b, 20*time.Second, "tenant B's topic on every broker", func() bool {
		for _, st := range qc.states {
			t, ok := st.View().Topic(bt.Tenant.ID, "b-events")
			if !ok {
				return false
			}
			id := t.ID
			qc.second.Store(&id)
		}
		return true
	})

	// Solo and noisy rounds alternate, so that a change in the machine's
	// load (it is shared) shows up in both; the medians are reported.
	var solo, noisy []noisyResult
	for i := 0; i < b.N*noisyPairs; i++ {
		solo = append(solo, noisyRound(b, qc, bt, nil))
		noisy = append(noisy, noisyRound(b, qc, bt, a))
		b.Logf("pair %d: solo %+v; noisy %+v", i+1, solo[i], noisy[i])
	}
	med := func(rs []noisyResult, f func(noisyResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(solo, func(r noisyResult) float64 { return r.p50 }), "solo-p50-ms")
	b.ReportMetric(med(solo, func(r noisyResult) float64 { return r.p99 }), "solo-p99-ms")
	b.ReportMetric(med(noisy, func(r noisyResult) float64 { return r.p50 }), "noisy-p50-ms")
	b.ReportMetric(med(noisy, func(r noisyResult) float64 { return r.p99 }), "noisy-p99-ms")
	b.ReportMetric(med(solo, func(r noisyResult) float64 { return r.fetchMBs }), "solo-fetch-MB/s")
	b.ReportMetric(med(noisy, func(r noisyResult) float64 { return r.fetchMBs }), "noisy-fetch-MB/s")
	b.ReportMetric(med(noisy, func(r noisyResult) float64 { return r.aAckedMBs }), "A-acked-MB/s")
	b.ReportMetric(med(noisy, func(r noisyResult) float64 { return r.aFetchMBs }), "A-fetch-MB/s")
	var throttled float64
	for _, r := range append(solo, noisy...) {
		throttled += r.bThrottled
	}
	b.ReportMetric(throttled, "B-produce-throttles")
}

// noisyPairs is how many solo/noisy pairs one benchmark iteration runs.
const noisyPairs = 3

// noisyReadRecords is how many of B's records each round reads back from
// the start of its topic: the same records every round, so that the
// fetch bucket's initial burst weighs the same in every figure.
const noisyReadRecords = 15_000

type noisyResult struct {
	p50, p99             float64 // B's produce latency, ms
	fetchMBs             float64 // B's fetch throughput, 10^6 B/s of values
	aAckedMBs, aFetchMBs float64 // A's acknowledged produce and fetched values, 10^6 B/s
	bThrottled           float64 // B's produce responses that carried a throttle
}

// noisyRound runs B's produce-then-read once, with A's load when a is set.
func noisyRound(b *testing.B, qc *quotaCell, bt, a *cptest.Tenant) noisyResult {
	var res noisyResult
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var aAcked, aFetched int64
	var amu sync.Mutex
	start := time.Now()
	if a != nil {
		prod := qc.client(b, a, kgo.DefaultProduceTopic("a-events"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(4096), kgo.ProducerBatchMaxBytes(256<<10))
		cons := qc.client(b, a, kgo.ConsumeTopics("a-events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		offered := rate.NewLimiter(rate.Limit(noisyAOffered), 64<<10)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if offered.WaitN(ctx, len(benchValue)) != nil {
					return
				}
				prod.Produce(ctx, &kgo.Record{Value: benchValue}, func(r *kgo.Record, err error) {
					if err == nil {
						amu.Lock()
						aAcked += int64(len(r.Value))
						amu.Unlock()
					}
				})
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cons.PollFetches(ctx)
				n := 0
				fs.EachRecord(func(r *kgo.Record) { n += len(r.Value) })
				amu.Lock()
				aFetched += int64(n)
				amu.Unlock()
			}
		}()
		// Let A's load reach its steady state before measuring B.
		warm := time.NewTimer(3 * time.Second)
		<-warm.C
	}

	// B: produce at a steady rate (paced by elapsed time, so a late tick
	// does not lower it), per-record latency.
	var thr throttleCount
	prod := qc.client(b, bt, kgo.DefaultProduceTopic("b-events"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(&thr))
	var lat []time.Duration
	var lmu sync.Mutex
	tick := time.NewTicker(10 * time.Millisecond)
	pstart := time.Now()
	sentN := 0
	for time.Since(pstart) < noisyProduceFor {
		<-tick.C
		due := int(time.Since(pstart).Seconds() * noisyBOffered / float64(len(benchValue)))
		for ; sentN < due; sentN++ {
			sent := time.Now()
			prod.Produce(ctx, &kgo.Record{Value: benchValue}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Errorf("tenant B produce: %v", err)
					return
				}
				lmu.Lock()
				lat = append(lat, time.Since(sent))
				lmu.Unlock()
			})
		}
	}
	tick.Stop()
	fctx, fcancel := context.WithTimeout(ctx, time.Minute)
	if err := prod.Flush(fctx); err != nil {
		b.Fatal(err)
	}
	fcancel()
	slices.Sort(lat)
	res.p50 = float64(lat[len(lat)/2].Microseconds()) / 1000
	res.p99 = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	res.bThrottled = float64(thr.n.Load())

	// B: read the first noisyReadRecords of its topic.
	var total int
	for _, o := range qc.highWatermarks(3, 3) {
		total += int(o)
	}
	total = min(total, noisyReadRecords)
	// Small fetch responses (64 KiB a partition), and the clock runs from
	// the first third of the records on, so that neither the fetch
	// bucket's initial burst nor the last responses' unpaid throttle
	// weighs much in the rate.
	cons := qc.client(b, bt, kgo.ConsumeTopics("b-events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(64<<10), kgo.FetchMaxBytes(192<<10))
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer rcancel()
	var readStart time.Time
	got, bytes := 0, 0
	for got < total {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			b.Fatalf("tenant B read %d of %d records", got, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			switch {
			case got == total/3:
				readStart = time.Now()
			case got > total/3:
				bytes += len(r.Value)
			}
		})
	}
	res.fetchMBs = float64(bytes) / time.Since(readStart).Seconds() / 1e6

	cancel()
	wg.Wait()
	if a != nil {
		el := time.Since(start).Seconds()
		res.aAckedMBs, res.aFetchMBs = float64(aAcked)/el/1e6, float64(aFetched)/el/1e6
	}
	return res
}

// highWatermarks returns the high watermarks of n Raft groups from first.
func (qc *quotaCell) highWatermarks(first, n int) []int64 {
	var out []int64
	for g := first; g < first+n; g++ {
		l := qc.cell.cell.WaitLeader(g, 10*time.Second)
		out = append(out, qc.cell.cell.Replica(l, g).HighWatermark())
	}
	return out
}
