package kafka_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
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
func BenchmarkProduce(b *testing.B) { benchProduce(b, false) }

// BenchmarkConsume: a franz-go direct partition consumer reading 1 KiB
// records that were just written (so from the page cache), sent with
// sendfile(2) on the plaintext connection.
func BenchmarkConsume(b *testing.B) { benchConsume(b, false) }

// BenchmarkListenerTLS: BenchmarkProduce and BenchmarkConsume with the
// Kafka listener's TLS off and on, in one run: on TLS connections fetches
// copy the records through user space to encrypt them (no sendfile), and
// produces decrypt them.
func BenchmarkListenerTLS(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("produce/tls=%v", on), func(b *testing.B) { benchProduce(b, on) })
		b.Run(fmt.Sprintf("fetch/tls=%v", on), func(b *testing.B) { benchConsume(b, on) })
	}
}

// benchBroker starts a broker, serving SASL_SSL when withTLS, with a
// topic of benchPartitions, and returns a client constructor for the
// tenant owning it.
func benchBroker(b *testing.B, withTLS bool) func(opts ...kgo.Opt) *kgo.Client {
	var o brokerOpts
	var dial []kgo.Opt
	if withTLS {
		cert, pool := selfSigned(b)
		o.tls = &tls.Config{Certificates: []tls.Certificate{cert}}
		dial = append(dial, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	}
	br := startBroker(b, o)
	a := br.cp.Signup("bench", "developer")
	br.createTopic(b, a, "bench", benchPartitions, nil)
	br.waitForKey(b, a)
	return func(opts ...kgo.Opt) *kgo.Client { return br.client(b, a, append(dial, opts...)...) }
}

func benchProducer(client func(opts ...kgo.Opt) *kgo.Client) *kgo.Client {
	return client(kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
}

func benchProduce(b *testing.B, withTLS bool) {
	cl := benchProducer(benchBroker(b, withTLS))
	produceN(b, cl, 1000) // connect and warm up
	b.SetBytes(int64(len(benchRecord)))
	b.ResetTimer()
	start := time.Now()
	produceN(b, cl, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func benchConsume(b *testing.B, withTLS bool) {
	client := benchBroker(b, withTLS)
	produceN(b, benchProducer(client), b.N)
	b.SetBytes(int64(len(benchRecord)))
	b.ResetTimer()
	start := time.Now()
	cons := client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": cellstack.FromStart(benchPartitions)}))
	cellstack.ConsumeN(b, cons, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
