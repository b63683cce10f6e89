package transport

import (
	"errors"
	"fmt"
	"time"
)

// When a connection is given up (dataplane/DESIGN.md, "Transport", "Silent
// peers"). Every group's heartbeats, votes and pings to one peer broker
// share one control connection, and its appends an append connection, so
// closing a connection fails every call on it at once. One call's timeout
// must therefore never close it: on a starved process a call times out
// while the peer still answers others, or while the answers wait in the
// socket for this process's reader to run, and closing the connection then
// failed the heartbeats of every idle group to that broker at once; their
// leaders, hearing from no quorum for the lease, stepped down. So a call
// that times out fails alone (conn.timedOut), and a connection is closed
// only on a write error or when its peer owes it an answer and has sent
// nothing at all (no frame, no answer to any call) for the lane's liveness
// window (Node.laneWindow).
//
// The silence is counted from the last frame read while calls were still
// waiting, or from the first request sent while none was. A live peer
// answers every request: pings and heartbeats on its connection's read
// goroutine, everything else within AppendTimeout (serveInbox answers
// codeTimeout then). On the control lane, where the liveness probe sends a
// ping every ProbeInterval, silence for LivenessWindow means the peer, or
// its read goroutine, is stuck (a handler that never returns holds every
// frame behind it); an append or mirror lane waits AppendTimeout longer,
// the longest a live peer takes to store and answer one append.
//
// The check runs on the connection's writeLoop when the alive timer fires,
// armed while the peer owes something. It closes only after it has seen
// the same silence twice, at least a quarter window apart: after a stall of
// the whole process the timer and the reader become runnable together, and
// a check that ran first would otherwise close a connection whose answers
// are waiting to be read.

// errSilent is the cause of a connection closed by the liveness window.
var errSilent = errors.New("peer silent for the liveness window")

// silence is a client connection's liveness state, guarded by conn.mu.
type silence struct {
	since     int64 // unix nanos the current silence began; 0: the peer owes nothing
	armed     bool  // the alive timer is set
	suspect   int64 // the silence (its since) a check first found past 3/4 of the window
	suspectAt int64 // unix nanos of that check
}

// laneWindow is the liveness window of a client connection of lane.
func (n *Node) laneWindow(lane laneKind) time.Duration {
	if lane == laneControl {
		return n.cfg.LivenessWindow
	}
	return n.cfg.AppendTimeout + n.cfg.LivenessWindow
}

// owe notes a request sent at now; c.mu held.
func (c *conn) owe(now int64) {
	s := &c.silence
	if s.since == 0 {
		s.since = now
	}
	if !s.armed {
		s.armed = true
		c.alive.Reset(time.Duration(c.window * 3 / 4))
	}
}

// heard notes a frame read at now; c.mu held. The silence starts again if
// calls still wait.
func (c *conn) heard(now int64) {
	if len(c.pending) > 0 {
		c.silence.since = now
	} else {
		c.silence.since = 0
	}
}

// checkAlive runs on writeLoop when the alive timer fires: it closes the
// connection if the peer has owed an answer for the window with nothing
// read, and otherwise sets the timer for the next check (or leaves it
// off while nothing is owed).
func (c *conn) checkAlive(now int64) {
	c.mu.Lock()
	s := &c.silence
	since := s.since
	if c.closed || since == 0 {
		s.armed = false
		c.mu.Unlock()
		return
	}
	w := c.window
	next := since + w*3/4
	if now >= next {
		if s.suspect != since {
			s.suspect, s.suspectAt = since, now
		}
		next = max(since+w, s.suspectAt+w/4)
		if now >= next {
			c.mu.Unlock()
			silent := time.Duration(now - since).Round(time.Millisecond)
			c.node.stats.silent.Add(1)
			c.node.log.Warn("raft transport peer silent; closing the connection", "lane", c.lane.String(), "peer", c.peer, "silent_for", silent)
			c.close(fmt.Errorf("nothing received for %s: %w", silent, errSilent))
			return
		}
	}
	c.alive.Reset(time.Duration(next - now))
	c.mu.Unlock()
}
