package lag

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	dlog "github.com/sluicehq/sluice/dataplane/log"
)

// BenchmarkTrackerLag measures one pass of a coordinator over its committed
// offsets: 100 partitions of 2,000 batches each (small segments, so lookups
// go through the offset index), 10 groups per partition committed at
// spread-out offsets. ns/op is the cost of one report's (or one scrape's)
// measurement of 1,000 committed offsets.
func BenchmarkTrackerLag(b *testing.B) {
	const parts, groupsPer, batches = 100, 10, 2000
	now := time.Now()
	topic := &wire.Topic{ID: "tp_bench", Name: "bench", Config: map[string]string{"retention.ms": "86400000", "retention.bytes": "1073741824"}}
	ps := make([]Partition, parts)
	batch := batchAt(now.UnixMilli(), 4, 200)
	for p := range ps {
		l, err := dlog.Open(context.Background(), dlog.Config{Dir: b.TempDir(), SegmentBytes: 256 << 10})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		for range batches {
			if _, _, err := l.Append(append([]byte(nil), batch...), 1); err != nil {
				b.Fatal(err)
			}
		}
		ps[p] = &logPartition{Log: l, hw: l.NextOffset()}
	}
	var cs []Committed
	for p := range parts {
		for g := range groupsPer {
			cs = append(cs, Committed{TenantID: "tn_bench", Group: fmt.Sprintf("g%d", g), TopicID: topic.ID, Partition: int32(p),
				Offset: int64(g * batches * 4 / groupsPer)})
		}
	}
	clock := now
	tr, err := New(Config{
		Committed: func() []Committed { return cs },
		Partition: func(_ string, p int32) (Partition, bool) { return ps[p], true },
		Topic:     func(string) (*wire.Topic, bool) { return topic, true },
		Now:       func() time.Time { clock = clock.Add(time.Second); return clock },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ls := tr.Lag(); len(ls) != parts*groupsPer || !ls[len(ls)-1].Measured {
			b.Fatalf("measured %d", len(ls))
		}
	}
}
