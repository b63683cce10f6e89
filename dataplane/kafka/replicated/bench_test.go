package replicated

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
)

const benchParts = 3

// benchValue is a 1 KiB value of random (incompressible) bytes.
var benchValue = func() []byte {
	b := make([]byte, 1024)
	rand.Read(b)
	return b
}()

// produceTimed sends n records and returns each one's latency from
// Produce to its acknowledgement.
func produceTimed(b *testing.B, cl *kgo.Client, n int) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		start := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: benchValue}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(start)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if firstErr != nil {
		b.Fatalf("produce: %v", firstErr)
	}
	return lat
}

func benchCell(b *testing.B) (*cell, *kgo.Client, func(...kgo.Opt) *kgo.Client) {
	b.Helper()
	c, tn := startCell(b, benchParts, "bench")
	// Preferred leaders: partition p's is broker p, so each broker leads one.
	celltest.WaitFor(b, 30*time.Second, "every partition led by its preferred broker", func() bool {
		for p := 0; p < benchParts; p++ {
			if c.cell.Leader(p) != p {
				return false
			}
		}
		return true
	})
	mk := func(opts ...kgo.Opt) *kgo.Client { return c.client(b, tn, opts...) }
	prod := mk(kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	return c, prod, mk
}

// produceMeasured warms prod up (connect, init the producer id, 2000
// records), then times b.N records through it with the benchmark's timer
// running, and returns each record's latency and the elapsed time.
func produceMeasured(b *testing.B, prod *kgo.Client) ([]time.Duration, time.Duration) {
	b.Helper()
	produceTimed(b, prod, 2000)
	b.SetBytes(int64(len(benchValue)))
	b.ResetTimer()
	start := time.Now()
	lat := produceTimed(b, prod, b.N)
	el := time.Since(start)
	b.StopTimer()
	return lat, el
}

// reportProduce reports the records a second and the p50 and p99 of lat.
func reportProduce(b *testing.B, lat []time.Duration, el time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkProduceReplicated: franz-go, idempotent (its default), acks=all,
// no compression, default batching (linger 10 ms, batches up to 1 MB),
// 1 KiB records round-robin over 3 partitions of a 3-broker Raft cell in
// this process; each partition's leader is a different broker. Reports
// per-record latency from the Produce call to the acknowledgement, which
// includes waiting for room in the client's buffer: buffer=100000 is a
// saturating load, buffer=1000 bounds the queue, buffer=1 produces one
// record at a time (the latency of one produce request).
func BenchmarkProduceReplicated(b *testing.B) {
	for _, buf := range []int{100_000, 1000, 1} {
		b.Run(fmt.Sprintf("buffer=%d", buf), func(b *testing.B) {
			_, _, mk := benchCell(b)
			prod := mk(kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(buf),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			lat, el := produceMeasured(b, prod)
			reportProduce(b, lat, el)
		})
	}
}

// BenchmarkConsumeReplicated: after producing b.N such records (untimed),
// a franz-go direct partition consumer reads them all from offset 0 from
// the three leaders (page cache, sendfile).
func BenchmarkConsumeReplicated(b *testing.B) {
	_, prod, mk := benchCell(b)
	produceTimed(b, prod, b.N)
	b.SetBytes(int64(len(benchValue)))
	b.ResetTimer()
	start := time.Now()
	cons := mk(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": cellstack.FromStart(benchParts)}))
	cellstack.ConsumeN(b, cons, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
