package transport

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Failure detection per broker, not per group (see dataplane/DESIGN.md,
// "Leaders in milliseconds"): the Node pings every watched peer broker on
// its control lane every ProbeInterval, and a peer that has answered none
// for DownAfter is down. Groups learn of it through OnPeerDown, so a
// partition whose leader was on that broker can elect another at once,
// while each idle group keeps its long Raft heartbeat timeout. The ping is
// one small frame each way per peer pair per interval, whatever the number
// of groups.

// liveness is one watched peer.
type liveness struct {
	id       raft.ServerID
	addr     raft.ServerAddress
	lastPong atomic.Int64 // unix nanos of the last answered probe (or of the watch)
	down     bool         // as last reported; owned by watchdog
}

// WatchPeers makes the Node probe the brokers of servers (except itself)
// from now on; watching one already watched (by id) changes nothing. A
// peer is watched for the Node's life: a cell has a handful of brokers.
func (g *GroupTransport) WatchPeers(servers []raft.Server) {
	n := g.node
	if n.cfg.ProbeInterval < 0 {
		return
	}
	for _, s := range servers {
		if s.ID == n.cfg.ID || s.Address == "" {
			continue
		}
		n.mu.Lock()
		if n.closed || n.live[s.ID] != nil {
			n.mu.Unlock()
			continue
		}
		l := &liveness{id: s.ID, addr: s.Address}
		l.lastPong.Store(time.Now().UnixNano()) // up until shown otherwise
		n.live[s.ID] = l
		n.spawnLocked(func() { n.probe(l) })
		n.mu.Unlock()
	}
}

// OnPeerDown registers fn, called with a watched peer's id when it is
// found down (down true) and when it answers again (down false). fn runs
// on the Node's watchdog goroutine and must not block. Closing the group
// unregisters it.
func (g *GroupTransport) OnPeerDown(fn func(id raft.ServerID, down bool)) {
	n := g.node
	n.mu.Lock()
	if !g.isClosed() {
		n.onDown[g] = fn
	}
	n.mu.Unlock()
}

// PeerDown reports whether the watched peer id has answered no probe for
// DownAfter; an unwatched peer is never down.
func (n *Node) PeerDown(id raft.ServerID) bool {
	n.mu.Lock()
	l := n.live[id]
	n.mu.Unlock()
	return l != nil && time.Since(time.Unix(0, l.lastPong.Load())) > n.cfg.DownAfter
}

// probe pings peer l every ProbeInterval until the Node closes. One probe
// is in flight at a time; it waits at most DownAfter.
func (n *Node) probe(l *liveness) {
	t := time.NewTicker(n.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if err := n.ping(l); err == nil {
			l.lastPong.Store(time.Now().UnixNano())
		}
	}
}

// ping sends one probe to l and waits for its answer. Injected faults
// apply to it as to every RPC.
func (n *Node) ping(l *liveness) error {
	d, err := n.faults.check(n.id, string(l.id))
	if err != nil {
		return err
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-n.ctx.Done():
			return ErrClosed
		}
	}
	n.stats.sent[kindPing].Add(1)
	c, err := n.peer(l.addr).control.get(string(l.id))
	if err != nil {
		return err
	}
	reqID, cl, err := c.send(kindPing, "", nil)
	if err != nil {
		return err
	}
	t := time.NewTimer(n.cfg.DownAfter)
	defer t.Stop()
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return r.err
		}
		if r.msg != nil {
			return fmt.Errorf("ping %s: unexpected answer %T", l.id, r.msg)
		}
		return nil
	case <-t.C:
		c.timedOut(reqID, cl)
		return fmt.Errorf("ping %s after %s: %w", l.id, n.cfg.DownAfter, ErrTimeout)
	case <-n.ctx.Done():
		c.forget(reqID)
		return errors.New("node closed")
	}
}

// watchdog reports peers going down and coming back, every
// ProbeInterval/2, to the groups' OnPeerDown functions.
func (n *Node) watchdog() {
	t := time.NewTicker(max(n.cfg.ProbeInterval/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		var changed []*liveness
		for _, l := range n.live {
			down := time.Since(time.Unix(0, l.lastPong.Load())) > n.cfg.DownAfter
			if down != l.down {
				l.down = down
				changed = append(changed, l)
			}
		}
		var fns []func(raft.ServerID, bool)
		if len(changed) > 0 {
			for _, fn := range n.onDown {
				fns = append(fns, fn)
			}
		}
		n.mu.Unlock()
		for _, l := range changed {
			if l.down {
				n.log.Warn("raft peer broker not answering; its partitions' followers elect new leaders", "peer", string(l.id), "down_after", n.cfg.DownAfter)
			} else {
				n.log.Info("raft peer broker answering again", "peer", string(l.id))
			}
			for _, fn := range fns {
				fn(l.id, l.down)
			}
		}
	}
}

// PeerDown reports whether the Node finds broker id down (Node.PeerDown).
func (g *GroupTransport) PeerDown(id raft.ServerID) bool { return g.node.PeerDown(id) }
