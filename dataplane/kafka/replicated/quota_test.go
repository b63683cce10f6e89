package replicated

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/quotashare"
	"github.com/sluicehq/sluice/quotas"
)

// flatOut produces 1 KiB records to topic as fast as the client lets it,
// choosing the partition of record i with part(i), until stop is called;
// stop waits for the producer to return. Errors other than the stop's
// cancellation are counted in failed.
type flatOut struct {
	cancel context.CancelFunc
	done   chan struct{}
	failed atomic.Int64
	first  atomic.Value // error
}

func produceFlatOut(cl *kgo.Client, part func(i int) int32) *flatOut {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flatOut{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for i := 0; ctx.Err() == nil; i++ {
			cl.Produce(ctx, &kgo.Record{Partition: part(i), Value: benchValue}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					f.failed.Add(1)
					f.first.CompareAndSwap(nil, err)
				}
			})
		}
	}()
	return f
}

func (f *flatOut) stop() {
	f.cancel()
	<-f.done
}

// skewed sends 80% of records to partition 0 and 10% to each of 1 and 2.
func skewed(i int) int32 {
	switch i % 10 {
	case 8:
		return 1
	case 9:
		return 2
	}
	return 0
}

// TestQuotaAccuracy: a tenant producing flat out against a 5 MB/s
// (5,000,000 B/s) produce quota, its three partitions led by the three
// brokers and its records skewed 80/10/10 between them, gets 5 MB/s ±5%
// from the cell as a whole, the brokers sharing the quota through Redis.
//
// Window edges: the window opens only once every broker shares by demand
// and the busiest broker's bucket is in debt (its burst is spent) and the
// shares have had 5 s to settle, so no initial burst is counted. Bytes
// count when franz-go sees a batch acknowledged. A broker throttles
// after acknowledging, so at either edge each broker may have one
// acknowledged batch per client whose throttle falls on the other side:
// batches are capped at 256 KiB and four clients produce, so the edges
// move the 150 MB total by at most 4 × 3 × 256 KiB each way (2.1%), and
// in practice the two edges offset each other.
func TestQuotaAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated cell for 30 s")
	}
	const quota = 5_000_000
	const window = 30 * time.Second
	rs := startRedis(t)
	qc := startQuotaCell(t, rs.addr(), 3, "metered", 0)
	tenant := qc.tn.Tenant.ID
	qc.setProduceQuota(t, tenant, quota)
	acked := &ackedBytes{}
	var perPart [3]atomic.Int64
	// Four producer clients (four connections to each broker). An
	// idempotent client has one produce request in flight per broker, so
	// the busiest broker gets at most 256 KiB per client per commit
	// round trip: with two clients a busy machine's 150 ms commits capped
	// the offered load at 88% of the quota, with the shares not binding.
	// Four keep the offered load above the quota up to about 250 ms.
	var fs []*flatOut
	for range 4 {
		prod := qc.client(t, qc.tn, kgo.DefaultProduceTopic("metered"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(8192),
			kgo.ProducerBatchMaxBytes(256<<10), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.WithHooks(acked, partitionBytes(perPart[:])))
		f := produceFlatOut(prod, skewed)
		defer f.stop()
		fs = append(fs, f)
	}

	celltest.WaitFor(t, 30*time.Second, "sharing by demand, broker 1's produce bucket in debt", func() bool {
		for _, qb := range qc.brokers {
			if qb.share.Mode() != quotashare.ModeShared {
				return false
			}
		}
		return qc.brokers[0].buckets.Debt(tenant, quotas.ProduceBytes, time.Now()) > 0
	})
	settle := time.NewTimer(5 * time.Second) // measurement design, not a wait for state
	<-settle.C
	start, b0 := time.Now(), acked.n.Load()
	var p0 [3]int64
	for i := range p0 {
		p0[i] = perPart[i].Load()
	}
	qc.logShares(t, window, time.Second, func() string {
		var line []string
		for _, qb := range qc.brokers {
			l, _ := qb.buckets.Limits(tenant)
			line = append(line, fmt.Sprintf("%.0fk", l[quotas.ProduceBytes].Rate/1e3))
		}
		return fmt.Sprintf("shares %v, acked %.1f MB", line, float64(acked.n.Load()-b0)/1e6)
	})
	el, got := time.Since(start), acked.n.Load()-b0
	rate := float64(got) / el.Seconds()
	var parts [3]float64
	for i := range parts {
		parts[i] = float64(perPart[i].Load()-p0[i]) / float64(got)
	}
	t.Logf("acknowledged %d bytes in %v: %.0f B/s (%.2f%% of the quota); partitions %.1f%% / %.1f%% / %.1f%%",
		got, el.Round(time.Millisecond), rate, 100*rate/quota, 100*parts[0], 100*parts[1], 100*parts[2])
	for _, qb := range qc.brokers {
		l, _ := qb.buckets.Limits(tenant)
		t.Logf("broker %s: share %.0f B/s, sharing %+v", qb.id, l[quotas.ProduceBytes].Rate, qb.share.Stats())
	}
	for _, f := range fs {
		if n := f.failed.Load(); n > 0 {
			t.Fatalf("%d records failed, first: %v", n, f.first.Load())
		}
	}
	if math.Abs(rate-quota)/quota > 0.05 {
		t.Fatalf("cell-wide rate %.0f B/s is not within 5%% of the %d B/s quota", rate, quota)
	}
}

// partitionBytes counts acknowledged batch bytes per partition.
type partitionBytes []atomic.Int64

func (p partitionBytes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, part int32, m kgo.ProduceBatchMetrics) {
	if int(part) < len(p) {
		p[part].Add(int64(m.CompressedBytes + batchOverhead))
	}
}

// TestQuotaRedisOutage: Redis dies while a tenant produces against its
// quota; every broker falls back to the even split (its share-mode metric
// says so), produce goes on without an error reaching the client, and
// when Redis is back the brokers share by demand again.
func TestQuotaRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated cell")
	}
	rs := startRedis(t)
	qc := startQuotaCell(t, rs.addr(), 3, "outage", 0)
	tenant := qc.tn.Tenant.ID
	qc.setProduceQuota(t, tenant, 3_000_000)
	acked := &ackedBytes{}
	prod := qc.client(t, qc.tn, kgo.DefaultProduceTopic("outage"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(2048),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(acked))
	f := produceFlatOut(prod, skewed)
	defer f.stop()

	mode := func(want string) func() bool {
		return func() bool {
			for _, qb := range qc.brokers {
				if celltest.Gauge(t, qb.reg, "sluice_quota_share_mode", "mode", want) != 1 {
					return false
				}
			}
			return true
		}
	}
	progress := func(what string) {
		t.Helper()
		from := acked.n.Load()
		celltest.WaitFor(t, 60*time.Second, what, func() bool { return acked.n.Load() >= from+3_000_000 })
	}
	celltest.WaitFor(t, 30*time.Second, "every broker sharing by demand", mode("shared"))
	progress("3 MB acknowledged while sharing")

	rs.stop()
	celltest.WaitFor(t, 30*time.Second, "every broker on the even-split fallback", mode("fallback"))
	progress("3 MB acknowledged under the fallback")
	for _, qb := range qc.brokers {
		if st := qb.share.Stats(); st.Fallbacks == 0 || st.FailedRounds == 0 {
			t.Errorf("broker %s: stats %+v show no fallback", qb.id, st)
		}
	}

	rs.start()
	celltest.WaitFor(t, 30*time.Second, "every broker sharing by demand again", mode("shared"))
	progress("3 MB acknowledged after Redis returned")
	f.stop()
	if n := f.failed.Load(); n > 0 {
		t.Fatalf("%d records failed, first: %v", n, f.first.Load())
	}
}

// TestDiskWatermark: broker 1's disk (injected usage) crosses its hard
// watermark: a produce it leads is refused with KAFKA_STORAGE_ERROR and a
// message naming the broker, its usage and the watermark; reads go on;
// when usage drops below soft the producer's retries succeed, and every
// acknowledged record reads back exactly once.
func TestDiskWatermark(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated cell")
	}
	rs := startRedis(t)
	qc := startQuotaCell(t, rs.addr(), 3, "disk", 0)
	tenant := qc.tn.Tenant.ID
	b1 := qc.brokers[0]

	var mu sync.Mutex
	acked := map[string]int{}
	var failed atomic.Int64
	prod := qc.client(t, qc.tn, kgo.DefaultProduceTopic("disk"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	send := func(from, to int) {
		for i := from; i < to; i++ {
			v := fmt.Sprintf("record-%05d", i)
			prod.Produce(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					t.Errorf("produce %s: %v", v, err)
					return
				}
				mu.Lock()
				acked[v]++
				mu.Unlock()
			})
		}
	}
	send(0, 300)
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	b1.disk.setPercent(93)
	celltest.WaitFor(t, 10*time.Second, "broker 1 above its hard watermark", func() bool { return b1.adm.DiskState() == quotas.DiskHard })

	// What a client sees: a raw Produce to broker 1 for partition 0.
	req := produceRequest("disk", 0, celltest.Batch([]byte("refused")))
	req.Version, req.TimeoutMillis = 9, 10_000
	kresp, err := prod.Broker(1).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	pr := kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	msg := ""
	if pr.ErrorMessage != nil {
		msg = *pr.ErrorMessage
	}
	t.Logf("produce above hard: error code %d, message %q", pr.ErrorCode, msg)
	if pr.ErrorCode != 56 { // KAFKA_STORAGE_ERROR, retriable
		t.Fatalf("error code %d, want 56 (KAFKA_STORAGE_ERROR)", pr.ErrorCode)
	}
	for _, want := range []string{"broker " + b1.id, "93.0% full", "90% hard watermark"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}

	// Records for partition 0 wait in the producer's retries meanwhile.
	send(300, 600)
	celltest.WaitFor(t, 20*time.Second, "the producer's retries refused", func() bool {
		return b1.adm.Rejections(tenant, "disk_full") >= 3
	})
	// Reads keep working on the full broker.
	readBack(t, qc, 0, 100)

	b1.disk.setPercent(50)
	celltest.WaitFor(t, 10*time.Second, "broker 1 below soft", func() bool { return b1.adm.DiskState() == quotas.DiskOK })
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := prod.Flush(fctx); err != nil {
		t.Fatalf("flush after recovery: %v", err)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d records failed", failed.Load())
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n != 600 {
		t.Fatalf("%d records acknowledged, want 600", n)
	}
	got := readAll(t, qc, 600)
	for v := range acked {
		if got[v] != 1 {
			t.Errorf("%s read back %d times", v, got[v])
		}
	}
}

// readBack reads at least n records of the "disk" topic's partition p.
func readBack(t *testing.T, qc *quotaCell, p int32, n int) {
	t.Helper()
	cons := qc.client(t, qc.tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"disk": {p: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of partition %d", got, n, p)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

// readAll reads the "disk" topic's three partitions until n records
// arrived and returns how often each value was read.
func readAll(t *testing.T, qc *quotaCell, n int) map[string]int {
	t.Helper()
	cons := qc.client(t, qc.tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"disk": cellstack.FromStart(3)}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]int{}
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[string(r.Value)]++
			got++
		})
	}
	return out
}
