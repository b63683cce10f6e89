package transport

import (
	"time"
)

// maxHeld bounds the requests waiting for their group to open (see hold),
// so that a peer sending to groups this broker will never open (deleted
// ones) costs at most that many goroutines.
const maxHeld = 4096

// serving reports whether g can take requests: it knows its membership
// (SetMembers). Before that every request would be refused.
func (g *GroupTransport) serving() bool { return g.members.Load() != nil }

// groupOpened wakes the requests held for a group to open.
func (n *Node) groupOpened() {
	n.mu.Lock()
	n.openedLocked()
	n.mu.Unlock()
}

func (n *Node) openedLocked() {
	close(n.opened)
	n.opened = make(chan struct{})
}

// hold makes a request for a group that is not open here (or does not
// know its membership yet) wait up to OpenWait for it, then dispatches it
// or answers ErrUnknownGroup. A new partition's replicas open on the
// three brokers at about the same time, and the preferred replica
// campaigns as soon as it opens (partition.Config.Bootstrap): without the
// wait its vote requests to peers a few milliseconds behind would fail and
// its candidacy would sit out a whole election timeout. Delaying a Raft
// RPC is only what a slow network does, so this changes nothing Raft
// relies on. It runs on the connection's read goroutine and never blocks
// it: false (the caller answers at once) when OpenWait is negative, too
// many requests already wait, or the Node is closing.
func (n *Node) hold(c *conn, f frame) bool {
	if n.cfg.OpenWait < 0 {
		return false
	}
	if n.stats.held.Add(1) > maxHeld {
		n.stats.held.Add(-1)
		return false
	}
	ok := n.spawn(func() {
		defer n.stats.held.Add(-1)
		t := time.NewTimer(n.cfg.OpenWait)
		defer t.Stop()
		for {
			n.mu.Lock()
			g, wake := n.groups[string(f.group)], n.opened
			n.mu.Unlock()
			if g != nil && g.serving() {
				n.dispatch(c, f, g)
				return
			}
			select {
			case <-wake:
			case <-t.C:
				n.stats.unknownGroup.Add(1)
				c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
				return
			case <-n.ctx.Done():
				return
			}
		}
	})
	if !ok {
		n.stats.held.Add(-1)
	}
	return ok
}
