package partition

import "github.com/hashicorp/raft"

// cacheFloor is the index up to which the replica's entry cache
// (raftlog.Cache.SetFloor) may let entries go: what this replica has
// applied (Raft reads an entry from the cache to apply it) and, on a
// leader, what every other member of the group has reported holding
// (replication reads the entries a follower lacks). A member without a
// fresh report holds the floor at 0: the cache's own bounds then decide.
func (r *Replica) cacheFloor() uint64 {
	floor := r.raft.AppliedIndex()
	if r.raft.State() != raft.Leader {
		return floor
	}
	p, ok := r.cfg.Transport.(progressReporter)
	if !ok {
		return 0
	}
	for _, s := range r.peersNow() {
		if s.ID == r.cfg.ID {
			continue
		}
		last, _, ok := p.PeerLastLog(s.ID)
		if !ok {
			return 0
		}
		floor = min(floor, last)
	}
	return floor
}
