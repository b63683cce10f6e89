package partition

import (
	"time"

	"github.com/hashicorp/raft"
)

// SetMaxProducers changes the producer-id bound for a test; the returned
// function restores it.
func SetMaxProducers(n int) (restore func()) {
	old := maxProducers
	maxProducers = n
	return func() { maxProducers = old }
}

// VotedAfter exposes votedAfter: whether the replica's Raft granted a vote
// in a term after term, as read from its stable store.
func (r *Replica) VotedAfter(term uint64) bool { return r.votedAfter(term) }

// SetTransfer makes maybeTransfer call fn instead of Raft's
// LeadershipTransferToServer; nil restores Raft's.
func (r *Replica) SetTransfer(fn func(raft.ServerID, raft.ServerAddress) raft.Future) {
	if fn == nil {
		r.transfer.Store(nil)
		return
	}
	r.transfer.Store(&fn)
}

// TransferBackoff exposes transferBackoff.
func TransferBackoff(n int, interval time.Duration) time.Duration {
	return transferBackoff(n, interval)
}

// SetBarrier makes the replica's barrier call fn instead of Raft's
// Barrier; nil restores Raft's.
func (r *Replica) SetBarrier(fn func(time.Duration) raft.Future) {
	if fn == nil {
		r.barrierFn.Store(nil)
		return
	}
	r.barrierFn.Store(&fn)
}

// PeerFoundDown reports whether the replica's transport finds broker id
// down (peerWatcher.PeerDown).
func (r *Replica) PeerFoundDown(id raft.ServerID) bool { return r.peerIsDown(id) }
