package transport

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerProgress is what a leader last heard of one follower's log.
type peerProgress struct {
	lastLog atomic.Uint64
	at      atomic.Int64 // unix nanos
}

// noteProgress records the follower's last log index, which every
// AppendEntries answer (heartbeats included) carries.
func (g *GroupTransport) noteProgress(id raft.ServerID, resp *raft.AppendEntriesResponse) {
	v, ok := g.progress.Load(id)
	if !ok {
		v, _ = g.progress.LoadOrStore(id, &peerProgress{})
	}
	p := v.(*peerProgress)
	p.lastLog.Store(resp.LastLog)
	p.at.Store(time.Now().UnixNano())
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
