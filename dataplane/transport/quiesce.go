package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// Quiescent heartbeats (see dataplane/DESIGN.md, "Leaders in
// milliseconds"). hashicorp/raft's leader heartbeats each follower every
// HeartbeatTimeout/10 to /5, so that the follower hears from it within
// HeartbeatTimeout and a lost leader is noticed. Dead brokers are detected
// per broker by the liveness probe instead, so most of those heartbeats
// carry nothing: a follower only needs one real contact per
// HeartbeatTimeout to keep its leader. With QuiesceHeartbeats set, a
// heartbeat to a follower that is caught up, whose broker answers probes
// and whose last real AppendEntries answer accepted this term less than
// quietFor ago is answered here, from that answer, without a frame on the
// wire; the others are sent. So is an empty append of Raft's replication
// loop (every CommitTimeout) that repeats the last one the follower
// accepted. Appends with entries or a new commit index, votes, TimeoutNow
// and snapshots are never answered here.

// contact is a follower's last successful AppendEntries answer.
type contact struct {
	at   int64 // unix nanos
	resp raft.AppendEntriesResponse
}

// held is what a follower holds from this leader after an answered append
// (not a heartbeat): its log ends at (last, lastTerm) and it knows commit.
type held struct {
	term, last, lastTerm, commit uint64
}

// QuiesceHeartbeats lets the group answer heartbeats, and empty appends
// that repeat the last one a follower accepted, to caught-up followers on
// live brokers itself, given its Raft HeartbeatTimeout: each follower
// still gets a real heartbeat or append at least every 2/5 ×
// heartbeatTimeout plus one heartbeat interval (at most
// heartbeatTimeout/5), so 3/5 × heartbeatTimeout, and never times out its
// leader. Zero or negative turns it off (the default: everything is
// sent). It needs the follower's broker watched (WatchPeers): an unwatched
// peer is never quiesced.
func (g *GroupTransport) QuiesceHeartbeats(heartbeatTimeout time.Duration) {
	if heartbeatTimeout <= 0 {
		g.quietFor.Store(0)
		return
	}
	g.quietFor.Store(int64(heartbeatTimeout * 2 / 5))
}

// noteContact records a successful AppendEntries answer of follower id to
// req.
func (g *GroupTransport) noteContact(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success || req == nil {
		return
	}
	p := g.progressOf(id)
	p.contact.Store(&contact{at: time.Now().UnixNano(), resp: *resp})
	if isHeartbeat(req) {
		return
	}
	h := &held{term: req.Term, last: req.PrevLogEntry, lastTerm: req.PrevLogTerm, commit: req.LeaderCommitIndex}
	if n := len(req.Entries); n > 0 {
		h.last, h.lastTerm = req.Entries[n-1].Index, req.Entries[n-1].Term
	}
	// Answers of one term may be noted out of order (a pipelined append
	// and a plain one); within a term the follower's log only grows and its
	// commit index only rises, so an older answer must not replace a newer.
	for {
		old := p.held.Load()
		if old != nil && old.term == h.term {
			if h.last < old.last {
				h.last, h.lastTerm = old.last, old.lastTerm
			}
			h.commit = max(h.commit, old.commit)
		} else if old != nil && old.term > h.term {
			return
		}
		if p.held.CompareAndSwap(old, h) {
			return
		}
	}
}

// quiesce answers args to follower id from its last real answer, and
// reports whether it did. args is a heartbeat or an append without
// entries that repeats what the follower already holds (same term, same
// previous entry, same commit index): its real answer would be the same.
// Conditions, all needed:
//   - quiescing is on (QuiesceHeartbeats);
//   - the follower's last successful answer is younger than quietFor and
//     answered this term (a follower that moved on to a later term, or
//     refused, gets real RPCs, whose answers tell Raft);
//   - it is caught up: that answer's last log is this group's last index
//     (when SetLocalLog gave it);
//   - its broker is watched and answered a probe within DownAfter.
//
// A quiesced answer refreshes the follower's progress (PeerLastLog) as a
// real one would: its last log cannot have moved back within this term.
func (g *GroupTransport) quiesce(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	quiet := g.quietFor.Load()
	if quiet <= 0 {
		return false
	}
	v, ok := g.progress.Load(id)
	if !ok {
		return false
	}
	p := v.(*peerProgress)
	c := p.contact.Load()
	now := time.Now().UnixNano()
	if c == nil || now-c.at >= quiet || c.resp.Term != args.Term {
		return false
	}
	if !isHeartbeat(args) {
		h := p.held.Load()
		if len(args.Entries) > 0 || h == nil || h.term != args.Term || args.PrevLogEntry != h.last ||
			args.PrevLogTerm != h.lastTerm || args.LeaderCommitIndex != h.commit {
			return false
		}
	}
	if l := g.local.Load(); l != nil && c.resp.LastLog < l.lastIndex() {
		return false
	}
	if !g.node.peerUp(id) {
		return false
	}
	*resp = c.resp
	p.lastLog.Store(c.resp.LastLog)
	p.at.Store(now)
	if g.local.Load() != nil {
		storeLater(&p.caughtUp, now) // it holds the whole log (checked above)
	}
	g.node.stats.quiesced.Add(1)
	return true
}

// peerUp reports whether peer id is watched and not down (isDown): it
// answered a probe within DownAfter and did not just restart, which would
// make its last real answer one of a process that no longer exists.
// Unlike PeerDown, an unwatched peer is not up.
func (n *Node) peerUp(id raft.ServerID) bool {
	n.mu.Lock()
	l := n.live[id]
	n.mu.Unlock()
	return l != nil && !n.isDown(l, time.Now())
}
