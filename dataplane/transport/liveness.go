package transport

import (
	"crypto/rand"
	"encoding/hex"
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
//
// A broker that restarts faster than DownAfter would never be found down,
// yet its process has forgotten that it led: its groups wait out Raft's
// long election timeout. So every ping answer carries the answering Node's
// incarnation (a random id drawn at New, in the frame's otherwise unused
// group field; an older broker answers with none and is never taken for
// restarted), and a peer whose incarnation changes counts as down for
// restartHold: its partitions' followers elect new leaders at once, as for
// a dead broker, and leadership returns to it only after that.

// liveness is one watched peer.
type liveness struct {
	id          raft.ServerID
	addr        raft.ServerAddress
	lastPong    atomic.Int64 // unix nanos of the last answered probe (or of the watch)
	restartedAt atomic.Int64 // unix nanos when a new incarnation answered; 0 if never
	incarnation string       // the peer's, from its last answer; owned by probe
	down        bool         // as last reported; owned by watchdog
}

// restartHold is how long a restarted peer counts as down, in multiples of
// DownAfter: long enough for the last-ranked follower's staggered campaign
// to find it still down (the stagger grows by partition.Config.FailoverStagger
// per rank).
const restartHold = 2

// newIncarnation draws a Node's incarnation.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on a supported platform
	return hex.EncodeToString(b[:])
}

// heardFrom is when peer l last counts as heard from: its last answer, or
// when this Node last resumed after not running for longer than DownAfter
// (a SIGSTOP, a machine too busy to run it), whichever is later. A broker
// resumed after a 10 s pause used to find every peer silent for 10 s,
// report them all down at once, and have its replicas campaign with logs
// the others had moved past: a campaign that could not win, whose higher
// term later deposed the partition's healthy leader.
func (n *Node) heardFrom(l *liveness) time.Time {
	return time.Unix(0, max(l.lastPong.Load(), n.resumedAt.Load()))
}

// isDown reports whether l counts as down at now: not heard from for
// DownAfter, or a new incarnation less than restartHold × DownAfter ago.
func (n *Node) isDown(l *liveness, now time.Time) bool {
	if now.Sub(n.heardFrom(l)) > n.cfg.DownAfter {
		return true
	}
	r := l.restartedAt.Load()
	return r != 0 && now.Sub(time.Unix(0, r)) < restartHold*n.cfg.DownAfter
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
// DownAfter, or restarted a moment ago (isDown); an unwatched peer is
// never down.
func (n *Node) PeerDown(id raft.ServerID) bool {
	n.mu.Lock()
	l := n.live[id]
	n.mu.Unlock()
	return l != nil && n.isDown(l, time.Now())
}

// PeerAnswering reports whether the watched peer id answered a probe
// within DownAfter, whether or not it restarted a moment ago: a restarted
// broker's replicas have forgotten that they led (so PeerDown holds it
// down for their followers), but they vote and campaign like any live
// one. An unwatched peer answers.
func (n *Node) PeerAnswering(id raft.ServerID) bool { return n.answeredWithin(id, n.cfg.DownAfter) }

// PeerAnsweringNow reports whether the watched peer id answered a probe
// within half of DownAfter: two probes' time, what a live peer does even
// when another peer was found down a moment ago. A peer cut off together
// with others still counts as answering (PeerAnswering) for up to
// DownAfter, so the first of them found down would see the others alive;
// this tells them apart. An unwatched peer answers.
func (n *Node) PeerAnsweringNow(id raft.ServerID) bool {
	return n.answeredWithin(id, n.cfg.DownAfter/2)
}

// answeredWithin reports whether the watched peer id was heard from within
// d; an unwatched peer was.
func (n *Node) answeredWithin(id raft.ServerID, d time.Duration) bool {
	n.mu.Lock()
	l := n.live[id]
	n.mu.Unlock()
	return l == nil || time.Since(n.heardFrom(l)) <= d
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
		inc, err := n.ping(l)
		if err != nil {
			continue
		}
		now := time.Now().UnixNano()
		if inc != "" && l.incarnation != "" && inc != l.incarnation {
			l.restartedAt.Store(now)
			n.log.Info("raft peer broker restarted; its partitions' followers elect new leaders", "peer", string(l.id))
		}
		if inc != "" {
			l.incarnation = inc
		}
		l.lastPong.Store(now)
	}
}

// ping sends one probe to l and waits for its answer: the peer's
// incarnation, empty from a broker that sends none. Injected faults apply
// to it as to every RPC.
func (n *Node) ping(l *liveness) (string, error) {
	d, err := n.faults.check(n.id, string(l.id))
	if err != nil {
		return "", err
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-n.ctx.Done():
			return "", ErrClosed
		}
	}
	n.stats.sent[kindPing].Add(1)
	c, err := n.peer(l.addr).control.get(string(l.id))
	if err != nil {
		return "", err
	}
	reqID, cl, err := c.send(kindPing, "", nil)
	if err != nil {
		return "", err
	}
	t := time.NewTimer(n.cfg.DownAfter)
	defer t.Stop()
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return "", r.err
		}
		if r.msg != nil {
			return "", fmt.Errorf("ping %s: unexpected answer %T", l.id, r.msg)
		}
		return r.incarnation, nil
	case <-t.C:
		c.timedOut(reqID)
		return "", fmt.Errorf("ping %s after %s: %w", l.id, n.cfg.DownAfter, ErrTimeout)
	case <-n.ctx.Done():
		c.forget(reqID)
		return "", errors.New("node closed")
	}
}

// watchdog reports peers going down and coming back, every
// ProbeInterval/2, to the groups' OnPeerDown functions.
func (n *Node) watchdog() {
	t := time.NewTicker(max(n.cfg.ProbeInterval/2, time.Millisecond))
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		n.checkPeers(now, now.Sub(prev))
		prev = now
	}
}

// checkPeers is one pass of the watchdog at now, sinceLast after the
// previous one. A pass that comes more than DownAfter after the previous
// one finds this Node resumed from a stall: peers get DownAfter from now
// to answer again before any counts as down (heardFrom).
func (n *Node) checkPeers(now time.Time, sinceLast time.Duration) {
	if sinceLast > n.cfg.DownAfter {
		n.resumedAt.Store(now.UnixNano())
		n.log.Info("raft transport did not run for longer than down_after (paused or starved); its peers get down_after to answer again",
			"stalled", sinceLast.Round(time.Millisecond), "down_after", n.cfg.DownAfter)
	}
	n.mu.Lock()
	var changed []*liveness
	for _, l := range n.live {
		down := n.isDown(l, now)
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
		switch {
		case l.down && now.Sub(n.heardFrom(l)) <= n.cfg.DownAfter:
			// Answering, but restarted: probe has said so.
		case l.down:
			n.log.Warn("raft peer broker not answering; its partitions' followers elect new leaders", "peer", string(l.id), "down_after", n.cfg.DownAfter)
		default:
			n.log.Info("raft peer broker answering again", "peer", string(l.id))
		}
		for _, fn := range fns {
			fn(l.id, l.down)
		}
	}
}

// PeerDown reports whether the Node finds broker id down (Node.PeerDown).
func (g *GroupTransport) PeerDown(id raft.ServerID) bool { return g.node.PeerDown(id) }

// PeerAnswering is Node.PeerAnswering.
func (g *GroupTransport) PeerAnswering(id raft.ServerID) bool { return g.node.PeerAnswering(id) }

// PeerAnsweringNow is Node.PeerAnsweringNow.
func (g *GroupTransport) PeerAnsweringNow(id raft.ServerID) bool { return g.node.PeerAnsweringNow(id) }
