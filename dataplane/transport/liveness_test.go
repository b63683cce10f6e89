package transport

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestPeerDownReported: a watched peer that stops answering probes (its
// link cut, as a dead or paused broker would look) is reported down to
// the groups' OnPeerDown after DownAfter, and up again once it answers;
// nothing is reported while it answers.
func TestPeerDownReported(t *testing.T) {
	faults := NewFaults()
	nodes := newNodes(t, 2, faults, func(c *Config) {
		c.ProbeInterval, c.DownAfter = 20*time.Millisecond, 200*time.Millisecond
	})
	a, b := nodes[0], nodes[1]
	g := mustGroup(t, a, "watched")
	var mu sync.Mutex
	var events []bool
	g.OnPeerDown(func(id raft.ServerID, down bool) {
		if id != b.ID() {
			t.Errorf("event for %s, want %s", id, b.ID())
		}
		mu.Lock()
		events = append(events, down)
		mu.Unlock()
	})
	g.WatchPeers([]raft.Server{{ID: a.ID(), Address: a.Addr()}, {ID: b.ID(), Address: b.Addr()}})
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("a probe answered", func() bool { return a.Stats().Sent["ping"] >= 3 && b.Stats().Received["ping"] >= 3 })
	if a.PeerDown(b.ID()) || a.PeerDown(a.ID()) {
		t.Fatal("an answering peer (or the node itself) reported down")
	}
	faults.Partition(string(a.ID()), string(b.ID()))
	waitUntil("the cut peer reported down", func() bool { return a.PeerDown(b.ID()) })
	if a.PeerAnswering(b.ID()) {
		t.Fatal("a cut peer reported down still counts as answering")
	}
	waitUntil("the down event", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) == 1 })
	faults.Heal()
	waitUntil("the healed peer reported up", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if !events[0] || events[1] {
		t.Fatalf("events %v, want [down up]", events)
	}
	if a.PeerDown(b.ID()) {
		t.Fatal("healed peer still down")
	}
}

// TestRestartedPeerReported: a peer whose broker restarts faster than
// DownAfter (a new Node on the same address and id, with a new
// incarnation) is reported down at once, as a dead broker would be after
// DownAfter, and up again after the restart hold; a pause (a cut link,
// healed) is not taken for a restart. DownAfter is far longer than the
// restart, so only the restart path can report it down in time.
func TestRestartedPeerReported(t *testing.T) {
	faults := NewFaults()
	const downAfter = 2 * time.Second
	mod := func(c *Config) { c.ProbeInterval, c.DownAfter = 20*time.Millisecond, downAfter }
	nodes := newNodes(t, 2, faults, mod)
	a, b := nodes[0], nodes[1]
	g := mustGroup(t, a, "watched")
	events := make(chan bool, 8)
	g.OnPeerDown(func(_ raft.ServerID, down bool) { events <- down })
	g.WatchPeers([]raft.Server{{ID: b.ID(), Address: b.Addr()}})
	a.mu.Lock()
	l := a.live[b.ID()]
	a.mu.Unlock()
	waitPings := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for b.Stats().Received["ping"] < n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d pings", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitPings(3)
	// A short pause keeps the incarnation.
	faults.Partition(string(a.ID()), string(b.ID()))
	time.Sleep(100 * time.Millisecond) // the fault's length, not a wait for state
	faults.Heal()
	waitPings(b.Stats().Received["ping"] + 3)
	if l.restartedAt.Load() != 0 || a.PeerDown(b.ID()) {
		t.Fatal("a paused peer was taken for restarted")
	}

	addr := b.Addr()
	stopped := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var b2 *Node
	for deadline := time.Now().Add(5 * time.Second); b2 == nil; {
		cfg := Config{ID: b.ID(), ListenAddr: string(addr), Faults: faults, Credentials: testCredentials(t, b.ID())}
		mod(&cfg)
		n, err := New(cfg)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the port may still be held
			continue
		}
		b2 = n
	}
	t.Cleanup(func() { _ = b2.Close() })
	select {
	case down := <-events:
		if !down {
			t.Fatal("first event after the restart is up, want down")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("restarted peer never reported down")
	}
	if took := time.Since(stopped); took >= downAfter {
		t.Logf("restart reported after %v, not before DownAfter: the machine was too slow to tell the paths apart", took)
	} else if l.restartedAt.Load() == 0 {
		t.Fatal("reported down before DownAfter without a restart seen")
	} else if !a.PeerAnswering(b.ID()) {
		t.Fatal("a restarted peer held down does not count as answering: its replicas could not rank ahead of others")
	}
	select {
	case down := <-events:
		if down {
			t.Fatal("second event is down, want up")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("restarted peer never reported up again")
	}
	if a.PeerDown(b.ID()) {
		t.Fatal("restarted peer still down after the hold")
	}
}

// TestResumedNodeGivesPeersTime: a Node whose watchdog did not run for
// longer than DownAfter (its broker was paused, or starved) heard no
// answers meanwhile through no fault of its peers: it reports none of
// them down at once, but only one that stays silent for DownAfter after
// the resume. Probes and the watchdog's own ticks are hours apart here;
// the test drives the watchdog's passes itself.
func TestResumedNodeGivesPeersTime(t *testing.T) {
	const downAfter = 2 * time.Hour
	nodes := newNodes(t, 2, NewFaults(), func(c *Config) { c.ProbeInterval, c.DownAfter = time.Hour, downAfter })
	a, b := nodes[0], nodes[1]
	g := mustGroup(t, a, "watched")
	var events []bool
	g.OnPeerDown(func(_ raft.ServerID, down bool) { events = append(events, down) })
	g.WatchPeers([]raft.Server{{ID: b.ID(), Address: b.Addr()}})
	a.mu.Lock()
	l := a.live[b.ID()]
	a.mu.Unlock()

	now := time.Now()
	l.lastPong.Store(now.Add(-3 * time.Hour).UnixNano()) // no answer heard during a 3 h pause
	a.checkPeers(now, 3*time.Hour)
	if len(events) != 0 || a.PeerDown(b.ID()) || !a.PeerAnswering(b.ID()) || !a.PeerAnsweringNow(b.ID()) {
		t.Fatalf("after a 3 h stall of its own: events %v, peer down %t, answering %t; want no event, not down, answering",
			events, a.PeerDown(b.ID()), a.PeerAnswering(b.ID()))
	}
	a.checkPeers(now.Add(time.Hour), time.Hour)
	if len(events) != 0 {
		t.Fatalf("peer reported down within DownAfter of the resume: events %v", events)
	}
	a.checkPeers(now.Add(downAfter+time.Second), time.Hour+time.Second)
	if len(events) != 1 || !events[0] {
		t.Fatalf("peer silent for DownAfter after the resume: events %v, want [down]", events)
	}

	// Without a stall of its own, a peer silent for longer than DownAfter
	// is down at the next pass, as before.
	c := mustGroup(t, b, "watcher")
	c.WatchPeers([]raft.Server{{ID: a.ID(), Address: a.Addr()}})
	var down []bool
	c.OnPeerDown(func(_ raft.ServerID, d bool) { down = append(down, d) })
	b.mu.Lock()
	la := b.live[a.ID()]
	b.mu.Unlock()
	// Heard from 0.6 × DownAfter ago: still answering, but not lately.
	la.lastPong.Store(time.Now().Add(-downAfter * 6 / 10).UnixNano())
	if !b.PeerAnswering(a.ID()) || b.PeerAnsweringNow(a.ID()) {
		t.Fatalf("peer heard 0.6 × DownAfter ago: answering %t, answering now %t; want true, false",
			b.PeerAnswering(a.ID()), b.PeerAnsweringNow(a.ID()))
	}
	la.lastPong.Store(now.Add(-3 * time.Hour).UnixNano())
	b.checkPeers(now, time.Minute)
	if len(down) != 1 || !down[0] {
		t.Fatalf("peer silent for 3 h, no stall of the watcher's own: events %v, want [down]", down)
	}
}
