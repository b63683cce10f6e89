package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoProduceConsume drives the listener with franz-go as a tenant
// would: SASL/PLAIN with an API key, keyed records with acks=all, then a
// direct partition consumer from the start. Offsets are dense from 0 and
// every partition reads back in the order it was written.
func TestFranzGoProduceConsume(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 3, nil)
	b.waitForKey(t, a)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := b.client(t, a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("orders"), kgo.ProducerLinger(5*time.Millisecond))
	const n = 600
	sent := map[int32][]string{}
	results := make(chan *kgo.Record, n)
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("customer-%d", i%17)), Value: []byte(fmt.Sprintf("order-%d", i))}
		prod.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
			results <- r
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	byPart := map[int32]map[int64]string{}
	keyPart := map[string]int32{}
	for range n {
		r := <-results
		if byPart[r.Partition] == nil {
			byPart[r.Partition] = map[int64]string{}
		}
		if _, dup := byPart[r.Partition][r.Offset]; dup {
			t.Fatalf("offset %d of partition %d acknowledged twice", r.Offset, r.Partition)
		}
		byPart[r.Partition][r.Offset] = string(r.Value)
		if p, ok := keyPart[string(r.Key)]; ok && p != r.Partition {
			t.Fatalf("key %s went to partitions %d and %d", r.Key, p, r.Partition)
		}
		keyPart[string(r.Key)] = r.Partition
	}
	if t.Failed() {
		t.FailNow()
	}
	offsets := map[int32]kgo.Offset{}
	for p, m := range byPart {
		for o := range int64(len(m)) {
			v, ok := m[o]
			if !ok {
				t.Fatalf("partition %d: offsets not dense from 0: %d missing of %d", p, o, len(m))
			}
			sent[p] = append(sent[p], v)
		}
		offsets[p] = kgo.NewOffset().AtStart()
	}
	if len(byPart) < 2 {
		t.Fatalf("17 keys landed in %d partition(s)", len(byPart))
	}

	cons := b.client(t, a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": offsets}), kgo.FetchMaxWait(500*time.Millisecond))
	got := map[int32][]string{}
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := int64(len(got[r.Partition])); r.Offset != want {
				t.Fatalf("partition %d: read offset %d, want %d", r.Partition, r.Offset, want)
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p, want := range sent {
		if fmt.Sprint(got[p]) != fmt.Sprint(want) {
			t.Fatalf("partition %d read back %v, want %v", p, got[p], want)
		}
	}
}
