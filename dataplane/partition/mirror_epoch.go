package partition

import (
	"math"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// A promoted mirror's leader epochs (DESIGN.md, "Tenant moves across
// cells"): the promote entry carries an epoch base, at least every epoch
// the source wrote or served, and from its index on every epoch the
// partition exposes is base + Raft term: LeaderEpoch (Metadata, produce's
// current leader), the fetch epoch check, and the epoch stamped on the
// batches it appends, which their entries carry as raftlog.EpochExt so
// that every replica's store stamps the same. OffsetForLeaderEpoch
// (EpochEnd) answers from the epochs of the applied batches, the mirrored
// ones and then base + term. The base is FSM state (mirrorState), so a
// restarted or snapshot-seeded replica has it too. A partition that was
// never a mirror, or not yet promoted, has base 0: its epochs are its
// terms, as before.

// lastEpoch is the newest leader epoch of the applied batches (-1 if
// none); f.mu is held.
func (f *fsm) lastEpoch() int32 {
	if n := len(f.st.Epochs); n > 0 {
		return f.st.Epochs[n-1].Epoch
	}
	return -1
}

// epochAt is the Kafka leader epoch of Raft term t here: t plus the epoch
// base, or -1 if that no longer fits an int32 (the store refuses such
// entries).
func (r *Replica) epochAt(t uint64) int32 {
	base := uint64(r.fsm.epochBase.Load())
	if t > math.MaxInt32-base {
		return -1
	}
	return int32(base + t)
}

// applyBatch hands a produced batch to Raft: plain, or with the epoch
// base in its Extensions once the partition is a promoted mirror.
func (r *Replica) applyBatch(batch []byte, timeout time.Duration) raft.ApplyFuture {
	if base := r.fsm.epochBase.Load(); base > 0 {
		return r.raft.ApplyLog(raft.Log{Data: batch, Extensions: raftlog.EpochExt(base)}, timeout)
	}
	return r.raft.Apply(batch, timeout)
}
