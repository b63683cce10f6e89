package partition_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// TestFenceThenUnfence: a fenced partition refuses produce with ErrFenced,
// which the catalogue maps to not_leader (Kafka NOT_LEADER_OR_FOLLOWER,
// retriable), on its leader and on a new leader alike; unfenced, it takes
// produce again, after the offsets it held.
func TestFenceThenUnfence(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	produceN(t, c, 0, 5) // two records each: offsets 0–9
	lb := c.WaitLeader(0, waitLong)
	end, err := c.Replica(lb, 0).Fence(ctx)
	if err != nil || end != 10 {
		t.Fatalf("fence: end %d, %v; want 10", end, err)
	}
	if again, err := c.Replica(lb, 0).Fence(ctx); err != nil || again != end {
		t.Fatalf("fence again: end %d, %v; want %d", again, err, end)
	}
	refused := func() {
		t.Helper()
		_, err := c.Produce(ctx, 0, celltest.Batch([]byte("late")))
		var ce *catalog.Error
		if !errors.Is(err, partition.ErrFenced) || !errors.As(err, &ce) || ce.Entry != catalog.NotLeader || !ce.Entry.Retriable {
			t.Fatalf("produce to a fenced partition: %v; want ErrFenced as a retriable not_leader", err)
		}
	}
	refused()
	// Every replica applied the fence: a new leader refuses too.
	c.StopBroker(lb)
	nb := c.WaitLeader(0, waitLong)
	refused()
	if got, ok := c.Replica(nb, 0).Fenced(); !ok || got != end {
		t.Fatalf("new leader's fence: %d %v, want %d", got, ok, end)
	}
	c.StartBroker(lb)
	if err := c.Replica(nb, 0).Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if off, err := c.Produce(ctx, 0, celltest.Batch([]byte("again"))); err != nil || off != end {
		t.Fatalf("produce after unfence: %d, %v; want offset %d", off, err, end)
	}
	celltest.WaitFor(t, waitLong, "every replica to apply the unfence", func() bool {
		for b := 0; b < c.Brokers(); b++ {
			if _, ok := c.Replica(b, 0).Fenced(); ok {
				return false
			}
		}
		return true
	})
}

// mirrorBatch is a batch as another cell's log holds it: at base, in that
// cell's leader epoch.
func mirrorBatch(b []byte, base int64, epoch int32) []byte {
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	return b
}

// TestMirrorEntriesOnEveryReplica: mirror entries land at their own
// offsets with their own epochs on every replica, gaps included; one
// below the high watermark is a no-op; the state survives a restart of
// every broker; a promote that does not match the mirrored end is refused,
// and the matching one lets produce in after it.
func TestMirrorEntriesOnEveryReplica(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	start := raftlog.MirrorStart{LogStart: 10, ProducersAt: 12, Producers: []raftlog.MirrorProducer{
		{ID: 7000, Epoch: 0, Batches: []raftlog.MirrorBatch{{FirstSeq: 0, LastSeq: 1, BaseOffset: 10}}},
	}}
	if _, err := lead.AppendMirror(ctx, 0, nil); !errors.Is(err, partition.ErrNotMirror) {
		t.Fatalf("append before the start entry: %v, want ErrNotMirror", err)
	}
	if err := lead.StartMirror(ctx, start); err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Produce(ctx, celltest.Batch([]byte("x"))); !errors.Is(err, partition.ErrMirroring) {
		t.Fatalf("produce to a mirror: %v, want ErrMirroring", err)
	}
	batches := [][]byte{
		mirrorBatch(idemBatch(7000, 0, 0, 2), 10, 4), // in the start entry's states already
		mirrorBatch(idemBatch(7000, 0, 2, 1), 15, 6), // a gap 12–14 (compacted away at the source)
		mirrorBatch(idemBatch(7000, 0, 0, 2), 10, 4), // a re-pull: no-op
		mirrorBatch(celltest.Batch([]byte("y")), 16, 6),
	}
	hw, err := lead.AppendMirror(ctx, 10, batches)
	if err != nil || hw != 17 {
		t.Fatalf("append mirror: high watermark %d, %v; want 17", hw, err)
	}
	check := func() {
		t.Helper()
		waitHighWatermark(t, c, 17, "every replica to apply the mirror")
		for b := 0; b < c.Brokers(); b++ {
			r := c.Replica(b, 0)
			if r.LogStartOffset() != 10 {
				t.Fatalf("replica %d: log start %d, want 10", b, r.LogStartOffset())
			}
			ps, ok := r.Producer(7000)
			if !ok || len(ps.Batches) != 2 || ps.Batches[1] != (partition.ProducerBatch{FirstSeq: 2, LastSeq: 2, BaseOffset: 15}) {
				t.Fatalf("replica %d: producer state %+v", b, ps)
			}
			_, got, err := r.Store().Log().ReadBatch(15, nil)
			if err != nil || string(got) != string(batches[1]) {
				t.Fatalf("replica %d: batch at 15 differs (%v)", b, err)
			}
			if eps := r.Epochs(); len(eps) != 2 || eps[0] != (partition.EpochStart{Epoch: 4, StartOffset: 10}) || eps[1] != (partition.EpochStart{Epoch: 6, StartOffset: 15}) {
				t.Fatalf("replica %d: epochs %+v", b, eps)
			}
		}
	}
	check()
	for b := 0; b < c.Brokers(); b++ {
		c.StopBroker(b)
	}
	for b := 0; b < c.Brokers(); b++ {
		c.StartBroker(b)
	}
	check()
	lead = c.Replica(c.WaitLeader(0, waitLong), 0)
	if err := lead.PromoteMirror(ctx, 16, 0); !errors.Is(err, partition.ErrNotMirror) {
		t.Fatalf("promote at the wrong end: %v, want ErrNotMirror", err)
	}
	if err := lead.PromoteMirror(ctx, 17, 0); err != nil {
		t.Fatal(err)
	}
	if lead.Mirroring() {
		t.Fatal("a promoted mirror still says it mirrors")
	}
	// The producer goes on with its next sequence; its last batch again is
	// a duplicate.
	mustProduce(t, c, idemBatch(7000, 0, 3, 1), 17)
	mustProduce(t, c, idemBatch(7000, 0, 2, 1), 15)
	if _, err := lead.AppendMirror(ctx, 16, batches[3:]); !errors.Is(err, partition.ErrNotMirror) {
		t.Fatalf("append after the promotion: %v, want ErrNotMirror", err)
	}
}
