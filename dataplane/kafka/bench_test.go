package kafka_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const benchPartitions = 3

// benchRecord is a 1 KiB value of random (incompressible) bytes.
var benchRecord = func() []byte {
	b := make([]byte, 1024)
	rand.Read(b)
	return b
}()

func produceN(b *testing.B, cl *kgo.Client, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errs := make(chan error, 1)
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: benchRecord}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatalf("produce: %v", err)
	default:
	}
}

// BenchmarkProduce: franz-go producing 1 KiB records with acks=all, no compression and
// its default batching (linger 10 ms, up to 1 MB per batch) to one broker on loopback, over local single-replica
// partitions (append + fsync per commit round; no replication).
func BenchmarkProduce(b *testing.B) {
	br := startBroker(b, brokerOpts{})
	a := br.cp.Signup("bench", "developer")
	br.createTopic(b, a, "bench", benchPartitions, nil)
	br.waitForKey(b, a)
	cl := br.client(b, a, kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceN(b, cl, 1000) // connect and warm up
	b.SetBytes(int64(len(benchRecord)))
	b.ResetTimer()
	start := time.Now()
	produceN(b, cl, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkConsume: a franz-go direct partition consumer reading 1 KiB
// records that were just written (so from the page cache), sent with
// sendfile(2) on the plaintext connection.
func BenchmarkConsume(b *testing.B) {
	br := startBroker(b, brokerOpts{})
	a := br.cp.Signup("bench", "developer")
	br.createTopic(b, a, "bench", benchPartitions, nil)
	br.waitForKey(b, a)
	prod := br.client(b, a, kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceN(b, prod, b.N)
	offsets := map[int32]kgo.Offset{}
	for p := range int32(benchPartitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.SetBytes(int64(len(benchRecord)))
	b.ResetTimer()
	start := time.Now()
	cons := br.client(b, a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": offsets}))
	got := 0
	for got < b.N {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, b.N)
		}
		fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
