package replicated

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// hourRaft is the production Raft config with timeouts no test outlives.
func hourRaft() *raft.Config {
	c := partition.DefaultRaftConfig()
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	return c
}

// createAndProduce creates topic with parts partitions through Kafka
// CreateTopics (kadm) and produces one record to each partition with
// franz-go; it returns, per partition, the time from sending CreateTopics
// to the record's acknowledgement. Any error reaching the application
// (franz-go retries the retriable ones itself) fails the test.
func createAndProduce(t testing.TB, adm *kadm.Client, cl *kgo.Client, topic string, parts int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	res, err := adm.CreateTopic(ctx, int32(parts), -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	acked := make([]time.Duration, parts)
	errs := make(chan error, parts)
	for p := range parts {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("first")}, func(r *kgo.Record, err error) {
			acked[r.Partition] = time.Since(start)
			if err != nil {
				err = fmt.Errorf("produce to %s/%d: %w", topic, r.Partition, err)
			}
			errs <- err
		})
	}
	for range parts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return acked
}

// TestCreatedTopicTakesProduceAtOnce: a topic created through Kafka
// CreateTopics takes franz-go's first records with no error reaching the
// application, because each new partition's preferred replica leads at
// once. The cell runs Raft timeouts of an hour, so that a partition
// waiting for any timeout would fail the test at its 60 s deadline instead
// of passing slowly; the production timeouts differ only in length. The
// time from creation to each acknowledgement is logged (the target is
// under 1 s; BenchmarkCreateToFirstAck measures it with the production
// timeouts).
func TestCreatedTopicTakesProduceAtOnce(t *testing.T) {
	m := startManagedCell(t, hourRaft)
	tn := m.tenant("fresh")
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	for i := range 3 {
		acked := createAndProduce(t, adm, cl, fmt.Sprintf("fresh-%d", i), 3)
		t.Logf("topic fresh-%d: creation to first ack per partition %v", i, acked)
	}
}

// BenchmarkCreateToFirstAck: 100 new single-partition topics, one after
// another, each created through Kafka CreateTopics and produced to with
// franz-go (defaults) at once; reports the creation-to-first-ack p50, p99
// and max over the 100 (and over every b.N round):
//
//	go test -run '^$' -bench CreateToFirstAck -benchtime 1x ./dataplane/kafka/replicated/
func BenchmarkCreateToFirstAck(b *testing.B) {
	m := startManagedCell(b, nil)
	tn := m.tenant("bench")
	q, err := m.cp.Operator.AdminQuotas(context.Background(), tn.Tenant.ID)
	if err != nil {
		b.Fatal(err)
	}
	q.MaxTopics, q.MaxPartitions = 100*b.N+10, 100*b.N+10
	if _, err := m.cp.Operator.AdminSetQuotas(context.Background(), tn.Tenant.ID, q); err != nil {
		b.Fatal(err)
	}
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	var all []time.Duration
	b.ResetTimer()
	for i := range b.N {
		for j := range 100 {
			all = append(all, createAndProduce(b, adm, cl, fmt.Sprintf("bench-%d-%d", i, j), 1)...)
		}
	}
	b.StopTimer()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(f float64) float64 { return float64(all[int(f*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}
