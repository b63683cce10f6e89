package replicated

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// TestCompactedTopicEndToEnd: a topic created through kadm with
// cleanup.policy=compact refuses a keyless record with INVALID_RECORD,
// takes keyed ones, is compacted on every replica by the brokers' own
// cleaners, and a franz-go consumer from the start sees the newest value
// of every key at the offset it was produced at, and fewer records than
// were produced. Compaction cannot be turned on for an existing topic.
func TestCompactedTopicEndToEnd(t *testing.T) {
	m := startLifecycleCell(t, func(c *replicas.Config) { c.CompactInterval = 100 * time.Millisecond })
	tn := m.tenant("latest")
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{
		topicspec.CleanupPolicy: kadm.StringPtr("compact"), topicspec.SegmentBytes: kadm.StringPtr("1048576"),
		topicspec.MinCleanableDirtyRatio: kadm.StringPtr("0.01"),
	}, "latest")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create compacted topic: %v", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "latest", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}

	// 3.5 MiB of updates of 10 keys: segments of 1 MiB, rolled by the
	// leader's replicated rolls, the closed ones compacted.
	produced := map[int64]string{} // offset → value
	final := map[string]string{}
	val := make([]byte, 1000)
	const n = 3500
	var recs []*kgo.Record
	for i := range n {
		copy(val, fmt.Sprintf("update %06d", i))
		recs = append(recs, &kgo.Record{Topic: "latest", Key: []byte(fmt.Sprintf("key-%d", i%10)), Value: append([]byte(nil), val...)})
	}
	for i := 0; i < n; i += 100 {
		if err := cl.ProduceSync(ctx, recs[i:i+100]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for _, r := range recs {
		produced[r.Offset] = string(r.Value)
		final[string(r.Key)] = string(r.Value)
	}
	tp, ok := m.syncers[0].View().Topic(tn.Tenant.ID, "latest")
	if !ok {
		t.Fatal("the topic is not in the cell state")
	}
	topicID := tp.ID
	celltest.WaitFor(t, 60*time.Second, "every replica to compact the closed segments", func() bool {
		for b := range m.mgrs {
			r := m.replica(b, topicID, 0)
			if r == nil {
				return false
			}
			upTo, ok := r.CompactedTo()
			if !ok || upTo < 1<<20/1100 {
				return false
			}
		}
		return true
	})

	var written float64
	for _, mgr := range m.mgrs {
		reg := prometheus.NewRegistry()
		reg.MustRegister(replicas.NewCompactionMetrics(func() *replicas.Manager { return mgr })...)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "sluice_cleaner_written_bytes_total" {
				written += mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}
	if written == 0 {
		t.Fatal("sluice_cleaner_written_bytes_total is 0 on every broker after compaction")
	}

	cons := m.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"latest": {0: kgo.NewOffset().AtStart()}}))
	last := map[string]string{}
	seen, prev := 0, int64(-1)
	for len(last) < 10 || !sameMap(last, final) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= prev {
				t.Fatalf("offset %d after %d", r.Offset, prev)
			}
			prev = r.Offset
			if produced[r.Offset] != string(r.Value) {
				t.Fatalf("offset %d holds %.13q, produced there was %.13q", r.Offset, r.Value, produced[r.Offset])
			}
			last[string(r.Key)] = string(r.Value)
			seen++
		})
	}
	if seen >= n {
		t.Fatalf("read %d records, as many as produced: nothing was compacted", seen)
	}
	t.Logf("read %d of %d records; newest value of every key at its original offset", seen, n)

	// ListOffsets: the range is the offsets produced, gaps or not; a
	// timestamp lookup lands inside it.
	starts, err := adm.ListStartOffsets(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("latest", 0); s.Offset != 0 || s.Err != nil {
		t.Fatalf("start offset %d, %v; want 0", s.Offset, s.Err)
	}
	if e, _ := ends.Lookup("latest", 0); e.Offset != n || e.Err != nil {
		t.Fatalf("end offset %d, %v; want %d", e.Offset, e.Err, n)
	}
	mid := recs[n/2].Timestamp.UnixMilli()
	byTS, err := adm.ListOffsetsAfterMilli(ctx, mid, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := byTS.Lookup("latest", 0); o.Err != nil || o.Offset < 0 || o.Offset > n {
		t.Fatalf("offset for timestamp %d: %d, %v", mid, o.Offset, o.Err)
	}

	// Compaction cannot be turned on for an existing topic.
	if res, err := adm.CreateTopic(ctx, 1, -1, nil, "plain"); err != nil || res.Err != nil {
		t.Fatalf("create plain topic: %v %v", err, res.Err)
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: topicspec.CleanupPolicy, Value: kadm.StringPtr("compact")}}, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := ar.On("plain", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("turning compaction on: %v, want INVALID_CONFIG", r.Err)
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
