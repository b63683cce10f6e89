package transport

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerProgress is what a leader last heard of one follower's log.
type peerProgress struct {
	lastLog  atomic.Uint64
	at       atomic.Int64            // unix nanos
	caughtUp atomic.Int64            // unix nanos; see PeerOutOfSync
	first    atomic.Int64            // unix nanos of the first answer
	contact  atomic.Pointer[contact] // last successful answer; see quiesce
	held     atomic.Pointer[held]    // what the last answered append left; see quiesce
}

// noteProgress records the follower's last log index, which every
// AppendEntries answer (heartbeats included) carries.
// req is the request answered, for noteContact; sent is when it was sent
// and end this group's last log index then (logEnd).
func (g *GroupTransport) noteProgress(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, sent time.Time, end uint64) {
	p := g.progressOf(id)
	now := time.Now().UnixNano()
	p.lastLog.Store(resp.LastLog)
	p.at.Store(now)
	p.first.CompareAndSwap(0, now)
	if resp.Success && resp.LastLog >= end {
		storeLater(&p.caughtUp, sent.UnixNano()) // answers to heartbeats and appends cross
	}
	g.noteContact(id, req, resp)
}

// logEnd is this group's last log index, or the most it can be (nothing
// counts as caught up) when the replica did not give it (SetLocalLog).
func (g *GroupTransport) logEnd() uint64 {
	if l := g.local.Load(); l != nil {
		return l.lastIndex()
	}
	return math.MaxUint64
}

// storeLater stores t in v unless v holds a later time.
func storeLater(v *atomic.Int64, t int64) {
	for {
		old := v.Load()
		if old >= t || v.CompareAndSwap(old, t) {
			return
		}
	}
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

// PeerOutOfSync is how long follower id has not held every entry this
// group's leader held: the time since the latest AppendEntries (heartbeats
// included) it answered with a log at least as long as the leader's was
// when that request was sent, or since this transport first heard from it
// if it never did; 0 if it never answered. This is Kafka's in-sync test (a
// follower is in sync while it reached the leader's log end within
// replica.lag.time.max.ms): under load a healthy follower is never level
// with the leader's log now, but it holds what each append carried.
func (g *GroupTransport) PeerOutOfSync(id raft.ServerID) time.Duration {
	v, ok := g.progress.Load(id)
	if !ok {
		return 0
	}
	p := v.(*peerProgress)
	n := max(p.caughtUp.Load(), p.first.Load())
	if n == 0 {
		return 0
	}
	return max(time.Since(time.Unix(0, n)), 0)
}

// localLog is what SetLocalLog gave: the group's own last log index, the
// lag a pipeline may start at, and a reader of its own entries.
type localLog struct {
	lastIndex func() uint64
	maxLag    uint64
	get       func(index uint64, out *raft.Log) error // nil: no top-up
}

// SetLocalLog gives the transport its group's own last log index, the
// most entries hashicorp/raft sends in one AppendEntries (its
// MaxAppendEntries) and a reader of the group's own log entries (its
// LogStore's GetLog; nil turns topping up off). With the first two,
// AppendEntriesPipeline refuses a pipeline to a follower that last
// reported a log more than maxLag entries behind (see behind); with the
// reader, a pipelined append carries every entry the log holds after its
// own, up to a frame (see topUp).
func (g *GroupTransport) SetLocalLog(lastIndex func() uint64, maxLag int, get func(index uint64, out *raft.Log) error) {
	g.local.Store(&localLog{lastIndex: lastIndex, maxLag: uint64(max(maxLag, 1)), get: get})
}

// topUpEntries bounds how many entries a topped-up append carries:
// hashicorp/raft's own limit for MaxAppendEntries, well below what the
// decoder accepts (maxEntriesPerFrame).
const topUpEntries = 1024

// topUp adds to a pipelined append the entries this group's log holds
// after the append's last one, while they fit in four fifths of a frame
// (the rest is room for headers) and topUpEntries.
//
// hashicorp/raft's pipeline sends one append of at most MaxAppendEntries
// entries per trigger, and a trigger is a channel of one: entries stored
// while the previous append was being sent share one trigger, and the
// append it sends leaves the rest behind until the next entry is stored
// or CommitTimeout (5–10 s in RaftConfig) passes. A leader whose writers
// wait for those entries to commit (a mirror's puller, producers
// awaiting acks) then stores nothing new: one batch of entries reached
// the followers every CommitTimeout, and a mirror copied a few records a
// second. Raft reads the request's entries after the call returns (the
// next index it sends from) and again on the answer (the follower's
// match index), so entries added here are accounted for as its own.
func (g *GroupTransport) topUp(args *raft.AppendEntriesRequest) {
	l := g.local.Load()
	n := len(args.Entries)
	if l == nil || l.get == nil || n == 0 || n >= topUpEntries {
		return
	}
	next, last := args.Entries[n-1].Index+1, l.lastIndex()
	if next > last {
		return
	}
	budget := g.node.cfg.MaxFrameSize / 5 * 4
	for _, e := range args.Entries {
		budget -= entrySize(e)
	}
	for ; next <= last && len(args.Entries) < topUpEntries; next++ {
		e := new(raft.Log)
		if err := l.get(next, e); err != nil {
			return // what raft would send next; it reads it again itself
		}
		if budget -= entrySize(e); budget < 0 {
			return
		}
		args.Entries = append(args.Entries, e)
	}
}

// entrySize is about what e takes in a frame.
func entrySize(e *raft.Log) int { return len(e.Data) + len(e.Extensions) + 64 }

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
