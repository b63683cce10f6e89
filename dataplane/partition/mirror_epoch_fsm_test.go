package partition

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// TestEpochBaseInSnapshot: the promoted mirror's epoch base is FSM state:
// a replica restored from a snapshot (restarted, or seeded by a peer)
// has the same base as the one that applied the promote entry.
func TestEpochBaseInSnapshot(t *testing.T) {
	f := &fsm{store: startAt(0)}
	ctl := func(i uint64, data []byte) *raft.Log {
		return &raft.Log{Index: i, Type: raft.LogCommand, Data: data, Extensions: raftlog.ControlExtension}
	}
	if res := f.Apply(ctl(1, raftlog.EncodeMirrorStart(raftlog.MirrorStart{}))).(applyResult); res.err != nil {
		t.Fatal(res.err)
	}
	m := &raft.Log{Index: 2, Type: raft.LogCommand, Data: idempotentBatch(0, 41, -1, 0, 0), Extensions: raftlog.MirrorExt(0)}
	if res := f.Apply(m).(applyResult); res.err != nil {
		t.Fatal(res.err)
	}
	if f.epochBase.Load() != 0 {
		t.Fatalf("epoch base %d before the promotion, want 0", f.epochBase.Load())
	}
	if res := f.Apply(ctl(3, raftlog.EncodePromote(raftlog.MirrorPromote{End: 1, EpochBase: 50}))).(applyResult); res.err != nil {
		t.Fatal(res.err)
	}
	if f.epochBase.Load() != 50 {
		t.Fatalf("epoch base %d after the promotion, want 50", f.epochBase.Load())
	}
	g := restoreCopy(t, f)
	if g.epochBase.Load() != 50 || g.moving.Load() {
		t.Fatalf("restored: epoch base %d, moving %v; want 50, not moving", g.epochBase.Load(), g.moving.Load())
	}
	if eps := g.epochs(); len(eps) != 1 || eps[0] != (EpochStart{Epoch: 41}) {
		t.Fatalf("restored epochs %+v", eps)
	}
}
