package partition_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// batchEpoch is the leader epoch of the batch at offset in r's log.
func batchEpoch(t *testing.T, r *partition.Replica, offset int64) int32 {
	t.Helper()
	h, _, err := r.Store().Log().ReadBatch(offset, nil)
	if err != nil {
		t.Fatalf("replica %s: read batch at %d: %v", r.ID(), offset, err)
	}
	return h.LeaderEpoch
}

// mirrorAndPromote starts a mirror on part 0 of c with two source
// batches at offsets 0 and 1 in source epochs 40 and 55, and promotes it
// with promote (the leader's call), returning the leader.
func mirrorAndPromote(t *testing.T, c *celltest.Cell, promote func(*partition.Replica) error) *partition.Replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	if err := lead.StartMirror(ctx, raftlog.MirrorStart{}); err != nil {
		t.Fatal(err)
	}
	batches := [][]byte{
		mirrorBatch(celltest.Batch([]byte("a")), 0, 40),
		mirrorBatch(celltest.Batch([]byte("b")), 1, 55),
	}
	if hw, err := lead.AppendMirror(ctx, 0, batches); err != nil || hw != 2 {
		t.Fatalf("append mirror: high watermark %d, %v; want 2", hw, err)
	}
	if err := promote(lead); err != nil {
		t.Fatal(err)
	}
	return lead
}

// TestPromotedMirrorEpochs: after a promotion with epoch base 60 every
// epoch the partition exposes is 60 + its term on every replica: the
// leader epoch, the fetch check, the epoch stamped on new batches; a
// leader change keeps them growing; OffsetForLeaderEpoch answers for the
// mirrored epochs and the new ones; every replica agrees after a restart
// of every broker.
func TestPromotedMirrorEpochs(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	lead := mirrorAndPromote(t, c, func(r *partition.Replica) error { return r.PromoteMirror(ctx, 2, 60) })
	term := lead.Raft().CurrentTerm()
	if got, want := lead.LeaderEpoch(), int32(60+term); got != want {
		t.Fatalf("leader epoch after the promotion: %d, want 60 + term %d = %d", got, term, want)
	}
	res, err := lead.FetchEpoch(lead.LeaderEpoch(), 0, 1<<20)
	if err != nil || res.LeaderEpoch != lead.LeaderEpoch() {
		t.Fatalf("fetch at the leader epoch: epoch %d, %v", res.LeaderEpoch, err)
	}
	res.Slice.Release()
	// A client that knows the source's epoch 55 is behind, not ahead.
	if _, err := lead.FetchEpoch(55, 0, 1<<20); !errors.Is(err, partition.ErrFencedLeaderEpoch) {
		t.Fatalf("fetch at the source's epoch: %v, want ErrFencedLeaderEpoch", err)
	}
	if _, err := lead.FetchEpoch(int32(term), 0, 1<<20); !errors.Is(err, partition.ErrFencedLeaderEpoch) {
		t.Fatalf("fetch at the bare term: %v, want ErrFencedLeaderEpoch", err)
	}
	mustProduce(t, c, celltest.Batch([]byte("c")), 2)
	mustProduce(t, c, idemBatch(9000, 0, 0, 1), 3)
	first := lead.LeaderEpoch()
	for _, off := range []int64{2, 3} {
		if got := batchEpoch(t, lead, off); got != first {
			t.Fatalf("batch at %d: epoch %d, want %d", off, got, first)
		}
	}

	// A new leader: a higher term, the same base.
	old := c.WaitLeader(0, waitLong)
	c.StopBroker(old)
	nb := c.WaitLeader(0, waitLong)
	lead = c.Replica(nb, 0)
	if got, want := lead.LeaderEpoch(), int32(60+lead.Raft().CurrentTerm()); got != want || got <= first {
		t.Fatalf("new leader's epoch %d, want %d, above %d", got, want, first)
	}
	second := lead.LeaderEpoch()
	mustProduce(t, c, celltest.Batch([]byte("d")), 4)
	c.StartBroker(old)

	wantEpochs := []partition.EpochStart{{Epoch: 40, StartOffset: 0}, {Epoch: 55, StartOffset: 1}, {Epoch: first, StartOffset: 2}, {Epoch: second, StartOffset: 4}}
	check := func(when string) {
		t.Helper()
		waitHighWatermark(t, c, 5, "every replica to apply offset 4 "+when)
		for b := 0; b < c.Brokers(); b++ {
			r := c.Replica(b, 0)
			for off, want := range []int32{40, 55, first, first, second} {
				if got := batchEpoch(t, r, int64(off)); got != want {
					t.Fatalf("%s: replica %d: batch at %d has epoch %d, want %d", when, b, off, got, want)
				}
			}
			eps := r.Epochs()
			if len(eps) != len(wantEpochs) {
				t.Fatalf("%s: replica %d: epochs %+v, want %+v", when, b, eps, wantEpochs)
			}
			for i := range eps {
				if eps[i] != wantEpochs[i] {
					t.Fatalf("%s: replica %d: epochs %+v, want %+v", when, b, eps, wantEpochs)
				}
			}
			if got, want := r.LeaderEpoch(), int32(60+r.Raft().CurrentTerm()); got != want {
				t.Fatalf("%s: replica %d: leader epoch %d, want %d", when, b, got, want)
			}
			for _, tc := range []struct {
				name      string
				ask, want int32
				end       int64
			}{
				{"first mirrored epoch", 40, 40, 1},
				{"last mirrored epoch", 55, 55, 2},
				{"between the source's epochs and the base", 59, 55, 2},
				{"first epoch after the promotion", first, first, 4},
				{"the current epoch", second, second, 5},
			} {
				ep, end, ok, err := r.EpochEnd(tc.ask)
				if err != nil || !ok || ep != tc.want || end != tc.end {
					t.Fatalf("%s: replica %d: %s: EpochEnd(%d) = %d, %d, %v, %v; want %d, %d", when, b, tc.name, tc.ask, ep, end, ok, err, tc.want, tc.end)
				}
			}
		}
	}
	check("after a leader change")
	for b := 0; b < c.Brokers(); b++ {
		c.StopBroker(b)
	}
	for b := 0; b < c.Brokers(); b++ {
		c.StartBroker(b)
	}
	check("after a restart")
	lead = c.Replica(c.WaitLeader(0, waitLong), 0)
	if got := lead.LeaderEpoch(); got <= second {
		t.Fatalf("leader epoch after a restart: %d, want above %d", got, second)
	}
}

// TestPromoteEpochBase: the base is the larger of the source's epoch and
// the newest mirrored one; a promote entry of the older form (no base)
// keeps the terms as epochs; one whose base is below a mirrored epoch is
// refused on every replica.
func TestPromoteEpochBase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		promote func(ctx context.Context, r *partition.Replica) error
		base    int32 // -1: refused
	}{
		{"source epoch below the mirrored ones", func(ctx context.Context, r *partition.Replica) error { return r.PromoteMirror(ctx, 2, 3) }, 55},
		{"source epoch above", func(ctx context.Context, r *partition.Replica) error { return r.PromoteMirror(ctx, 2, 70) }, 70},
		{"older entry without a base", func(ctx context.Context, r *partition.Replica) error {
			return applyRaw(ctx, r, raftlog.EncodeMirrorPromote(2))
		}, 0},
		{"base below a mirrored epoch", func(ctx context.Context, r *partition.Replica) error {
			return applyRaw(ctx, r, raftlog.EncodePromote(raftlog.MirrorPromote{End: 2, EpochBase: 54}))
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := celltest.New(t, celltest.Options{Partitions: 1})
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			var perr error
			lead := mirrorAndPromote(t, c, func(r *partition.Replica) error { perr = tc.promote(ctx, r); return nil })
			if tc.base < 0 {
				if perr != nil || !lead.Mirroring() {
					t.Fatalf("promote with a low base: %v, mirroring %v; want it refused by the state machine", perr, lead.Mirroring())
				}
				// The refusal left the mirror as it was: a proper promote
				// still takes it.
				if err := lead.PromoteMirror(ctx, 2, 0); err != nil || lead.LeaderEpoch() != 55+int32(lead.Raft().CurrentTerm()) {
					t.Fatalf("promote after the refusal: %v, leader epoch %d", err, lead.LeaderEpoch())
				}
				return
			}
			if perr != nil {
				t.Fatal(perr)
			}
			celltest.WaitFor(t, waitLong, "every replica to apply the promotion", func() bool {
				for b := 0; b < c.Brokers(); b++ {
					if c.Replica(b, 0).Mirroring() {
						return false
					}
				}
				return true
			})
			for b := 0; b < c.Brokers(); b++ {
				r := c.Replica(b, 0)
				if got, want := r.LeaderEpoch(), tc.base+int32(r.Raft().CurrentTerm()); got != want {
					t.Fatalf("replica %d: leader epoch %d, want base %d + term", b, got, tc.base)
				}
			}
			mustProduce(t, c, celltest.Batch([]byte("c")), 2)
			if got, want := batchEpoch(t, lead, 2), lead.LeaderEpoch(); got != want {
				t.Fatalf("new batch epoch %d, want %d", got, want)
			}
		})
	}
}

// applyRaw replicates a control entry's data as the leader and waits
// until the leader applied it.
func applyRaw(_ context.Context, r *partition.Replica, data []byte) error {
	return r.Raft().ApplyLog(raft.Log{Data: data, Extensions: raftlog.ControlExtension}, waitLong).Error()
}

// TestPromotedMirrorCrash: brokers of a promoted mirror that are cut as
// by a power failure while it takes produce recover with the same batch
// epochs as their peers, all of them base + a term, growing with the
// offset (recovery checks the last batch against base + term).
func TestPromotedMirrorCrash(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	mirrorAndPromote(t, c, func(r *partition.Replica) error { return r.PromoteMirror(ctx, 2, 60) })
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 3; round++ {
		done := make(chan error, 1)
		go func() {
			for i := 0; i < 20; i++ {
				if _, err := produceRetrying(ctx, c, celltest.Batch([]byte("x"))); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		b := rng.Intn(c.Brokers())
		c.CrashBroker(b, rng)
		c.StartBroker(b)
		if err := <-done; err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
	}
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	hw := lead.HighWatermark()
	waitHighWatermark(t, c, hw, "every replica to catch up")
	want := make([]int32, hw)
	for off := range want {
		want[off] = batchEpoch(t, lead, int64(off))
		if off >= 2 && (want[off] <= 60 || want[off] < want[off-1]) {
			t.Fatalf("batch at %d: epoch %d after %d, want above 60 and not lower", off, want[off], want[off-1])
		}
	}
	for b := 0; b < c.Brokers(); b++ {
		for off, w := range want {
			if got := batchEpoch(t, c.Replica(b, 0), int64(off)); got != w {
				t.Fatalf("replica %d: batch at %d has epoch %d, the leader's %d", b, off, got, w)
			}
		}
	}
}
