package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// TestEgressWaitBounded: a fetch whose turn in the egress budget does not
// come within MaxEgressWait past its MaxWait is answered without records
// (no error, the high watermark set, so the client fetches the same
// offset again) instead of holding the connection; the connection then
// serves the next request. The budget is 1 KB/s and the first response
// takes about 100 KB of it, so the second would otherwise wait about 100 s
// (longer than the raw connection's 10 s read deadline).
func TestEgressWaitBounded(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("acme", "")
	b.createTopic(t, tn, "big", 1, nil)
	b.waitForKey(t, tn)
	prod := b.client(t, tn, kgo.DefaultProduceTopic("big"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := context.Background()
	value := make([]byte, 1000)
	for range 100 {
		prod.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	adm, _ := newAdmission(t, admission.Config{EgressBytesPerSec: 1000})
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		adm.Run(actx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	addr := b.startServer(t, func(c *kafka.Config) {
		c.Admission = adm
		c.MaxEgressWait = 200 * time.Millisecond
	})

	rc := dialRaw(t, addr)
	if r := rc.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	fetch := func() kmsg.FetchResponseTopicPartition {
		t.Helper()
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.MaxBytes, r.MinBytes, r.MaxWaitMillis, r.SessionEpoch = 12, 1<<20, 1, 100, -1
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 1 << 20
		r.Topics = []kmsg.FetchRequestTopic{{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
		resp, err := rc.roundTrip(r)
		if err != nil {
			t.Fatalf("fetch not answered: %v", err)
		}
		return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	// The budget is not in debt: the first response goes at once.
	if p := fetch(); p.ErrorCode != 0 || len(p.RecordBatches) < 100_000 {
		t.Fatalf("first fetch: error %d, %d bytes of records, want ≥ 100000", p.ErrorCode, len(p.RecordBatches))
	}
	// The budget owes about 100 s: the next two are answered without
	// records.
	for i := range 2 {
		p := fetch()
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 100 {
			t.Fatalf("fetch %d in debt: error %d, %d bytes of records, high watermark %d; want 0, 0, 100",
				i+2, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
		}
	}
	if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("connection after late fetches: %v", err)
	}
}
