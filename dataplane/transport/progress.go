package transport

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerProgress is what a leader last heard of one follower's log.
type peerProgress struct {
	lastLog atomic.Uint64
	at      atomic.Int64            // unix nanos
	contact atomic.Pointer[contact] // last successful answer; see quiesce
	held    atomic.Pointer[held]    // what the last answered append left; see quiesce
}

// noteProgress records the follower's last log index, which every
// AppendEntries answer (heartbeats included) carries.
// req is the request answered, for noteContact.
func (g *GroupTransport) noteProgress(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	p := g.progressOf(id)
	p.lastLog.Store(resp.LastLog)
	p.at.Store(time.Now().UnixNano())
	g.noteContact(id, req, resp)
}

func (g *GroupTransport) progressOf(id raft.ServerID) *peerProgress {
	v, ok := g.progress.Load(id)
	if !ok {
		v, _ = g.progress.LoadOrStore(id, &peerProgress{})
	}
	return v.(*peerProgress)
}

// PeerLastLog is the last log index follower id reported to this group's
// leader, and when; ok is false if it never answered an AppendEntries.
// hashicorp/raft keeps its followers' progress to itself; a replica uses
// this to hand leadership only to a follower that is caught up.
func (g *GroupTransport) PeerLastLog(id raft.ServerID) (index uint64, at time.Time, ok bool) {
	v, ok := g.progress.Load(id)
	if !ok {
		return 0, time.Time{}, false
	}
	p := v.(*peerProgress)
	return p.lastLog.Load(), time.Unix(0, p.at.Load()), true
}

// localLog is what SetLocalLog gave: the group's own last log index and
// the lag a pipeline may start at.
type localLog struct {
	lastIndex func() uint64
	maxLag    uint64
}

// SetLocalLog gives the transport its group's own last log index and the
// most entries hashicorp/raft sends in one AppendEntries (its
// MaxAppendEntries). With them AppendEntriesPipeline refuses a pipeline to
// a follower that last reported a log more than maxLag entries behind
// (see behind).
func (g *GroupTransport) SetLocalLog(lastIndex func() uint64, maxLag int) {
	g.local.Store(&localLog{lastIndex: lastIndex, maxLag: uint64(max(maxLag, 1))})
}

// behind reports whether follower id last reported a log more than one
// AppendEntries batch behind this group's own. hashicorp/raft switches a
// follower to pipelining after one accepted AppendEntries, even when a
// later one of the same catch-up failed (a broker coming back, its group
// still opening); a pipeline then sends one batch per trigger, and an idle
// leader triggers only every CommitTimeout (5–10 s in RaftConfig): a
// backlog of thousands of entries took minutes to reach the follower, and
// the preferred replica, never caught up, never got leadership back.
// Refused a pipeline, Raft falls back to plain AppendEntries, which loop
// until the follower has everything.
func (g *GroupTransport) behind(id raft.ServerID) bool {
	l := g.local.Load()
	if l == nil {
		return false
	}
	last, _, ok := g.PeerLastLog(id)
	return ok && last+l.maxLag < l.lastIndex()
}
