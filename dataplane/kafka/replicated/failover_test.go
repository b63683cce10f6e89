package replicated

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
)

// TestIdempotentProduceThroughLeaderKill is invariant 5 end to end: a
// franz-go producer with idempotence on (its default) and acks=all writes
// 100,000 keyed records while the leader of partition 0 is killed and
// later restarted. Every record is acknowledged once, at a distinct
// offset; a consumer then reads each exactly once, in production order per
// partition, at offsets dense from 0, and nothing else is in the log.
func TestIdempotentProduceThroughLeaderKill(t *testing.T) {
	const (
		n     = 100_000
		parts = 3
		topic = "events"
	)
	c, tn := startCell(t, parts, topic)
	for p := 0; p < parts; p++ {
		c.cell.WaitLeader(p, 20*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	prod := c.client(t, tn, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10))

	type ack struct {
		part int32
		off  int64
	}
	acks := make([]ack, n)
	var acked atomic.Int64
	var errMu sync.Mutex
	var produceErrs []error
	produced := make(chan struct{})
	// The producer holds at the half until the leader is down, and at
	// three quarters until it is back, so both phases see traffic however
	// fast the machine is.
	killed, restarted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < n; i++ {
			var gate chan struct{}
			switch i {
			case n / 2:
				gate = killed
			case n * 3 / 4:
				gate = restarted
			}
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return // the test failed and cancelled
				}
			}
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%997), Value: strconv.AppendInt(nil, int64(i), 10)}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					errMu.Lock()
					produceErrs = append(produceErrs, fmt.Errorf("record %d: %w", i, err))
					errMu.Unlock()
				} else {
					acks[i] = ack{r.Partition, r.Offset}
				}
				acked.Add(1)
			})
		}
		if err := prod.Flush(ctx); err != nil {
			errMu.Lock()
			produceErrs = append(produceErrs, fmt.Errorf("flush: %w", err))
			errMu.Unlock()
		}
	}()

	celltest.WaitFor(t, 60*time.Second, "30% of the records acknowledged", func() bool { return acked.Load() >= n*3/10 })
	victim := c.cell.WaitLeader(0, 20*time.Second)
	c.kill(victim)
	close(killed)
	t.Logf("killed broker %d (leader of partition 0) at %d acknowledgements", victim, acked.Load())
	celltest.WaitFor(t, 60*time.Second, "a new leader of partition 0 and 60% acknowledged", func() bool {
		l := c.cell.Leader(0)
		return l >= 0 && l != victim && acked.Load() >= n*6/10
	})
	c.restart(victim)
	close(restarted)
	t.Logf("restarted broker %d at %d acknowledgements", victim, acked.Load())
	select {
	case <-produced:
	case <-ctx.Done():
		t.Fatalf("producing: %d of %d acknowledged: %v", acked.Load(), n, ctx.Err())
	}
	if len(produceErrs) > 0 {
		t.Fatalf("%d produce errors, first: %v", len(produceErrs), produceErrs[0])
	}

	// Acknowledgements: distinct offsets, dense per partition, in
	// production order per partition, one partition per key.
	byOff := make([]map[int64]int, parts)
	for p := range byOff {
		byOff[p] = map[int64]int{}
	}
	keyPart := map[int]int32{}
	for i, a := range acks {
		if prev, dup := byOff[a.part][a.off]; dup {
			t.Fatalf("records %d and %d both acknowledged at partition %d offset %d", prev, i, a.part, a.off)
		}
		byOff[a.part][a.off] = i
		if p, ok := keyPart[i%997]; ok && p != a.part {
			t.Fatalf("key k%d went to partitions %d and %d", i%997, p, a.part)
		}
		keyPart[i%997] = a.part
	}
	for p := range byOff {
		last := -1
		for o := int64(0); o < int64(len(byOff[p])); o++ {
			i, ok := byOff[p][o]
			if !ok {
				t.Fatalf("partition %d: offset %d of %d never acknowledged", p, o, len(byOff[p]))
			}
			if i < last {
				t.Fatalf("partition %d: record %d at offset %d after record %d", p, i, o, last)
			}
			last = i
		}
	}

	// Read everything back through the listeners.
	cons := c.client(t, tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: cellstack.FromStart(parts)}), kgo.FetchMaxWait(500*time.Millisecond))
	next := make([]int64, parts)
	seen := make([]bool, n)
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v (retried)", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: read offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if r.ProducerID < 0 {
				t.Fatalf("partition %d offset %d: no producer id; the client did not produce idempotently", r.Partition, r.Offset)
			}
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= n {
				t.Fatalf("partition %d offset %d: value %q", r.Partition, r.Offset, r.Value)
			}
			if seen[i] {
				t.Fatalf("record %d read twice (again at partition %d offset %d)", i, r.Partition, r.Offset)
			}
			seen[i] = true
			if a := acks[i]; a.part != r.Partition || a.off != r.Offset {
				t.Fatalf("record %d read at %d/%d, acknowledged at %d/%d", i, r.Partition, r.Offset, a.part, a.off)
			}
			total++
		})
	}
	// Nothing beyond: every partition's high watermark is what was read.
	for p := 0; p < parts; p++ {
		l := c.cell.WaitLeader(p, 20*time.Second)
		if hw := c.cell.Replica(l, p).HighWatermark(); hw != next[p] {
			t.Fatalf("partition %d: high watermark %d, read %d records", p, hw, next[p])
		}
	}
	t.Logf("read %d records exactly once: per partition %v", total, next)
}
