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
