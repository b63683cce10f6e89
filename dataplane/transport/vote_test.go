package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// vote asks b's group for a vote from group g and reports the outcome.
func vote(g *GroupTransport, from raft.ServerID, b *Node) error {
	var resp raft.RequestVoteResponse
	err := g.RequestVote(b.ID(), b.Addr(), &raft.RequestVoteRequest{RPCHeader: header(from), Term: 1}, &resp)
	if err == nil && !resp.Granted {
		err = errors.New("vote not granted")
	}
	return err
}

// TestVoteRetriedUntilGroupOpens: a vote request that fails without an
// answer from the receiving Raft (here its group opened after OpenWait, as
// on a broker that restarted a moment ago) is sent again and granted,
// where a candidate would otherwise count it refused and sit out its
// election timeout; without VoteRetry it fails. A peer that answers no
// probe is not asked again.
func TestVoteRetriedUntilGroupOpens(t *testing.T) {
	faults := NewFaults()
	nodes := newNodes(t, 3, faults, func(c *Config) {
		c.OpenWait, c.VoteRetry = 50*time.Millisecond, 20*time.Second
		c.ProbeInterval, c.DownAfter = 20*time.Millisecond, 200*time.Millisecond
	})
	a, b, c := nodes[0], nodes[1], nodes[2]
	ga := mustGroup(t, a, "late")
	voted := make(chan error, 1)
	go func() { voted <- vote(ga, a.ID(), b) }()
	testkit.WaitFor(t, 20*time.Second, "the vote request refused for an unknown group and sent again", func() bool {
		return b.Stats().UnknownGroup > 0 && a.Stats().VoteRetries > 0
	})
	serveFake(t, b, "late", nil)
	if err := <-voted; err != nil {
		t.Fatalf("vote to a group that opened late: %v", err)
	}

	once := newNodes(t, 1, nil, func(c *Config) { c.OpenWait, c.VoteRetry = 50*time.Millisecond, -1 })[0]
	g1 := mustGroup(t, once, "late")
	if err := vote(g1, once.ID(), b); err != nil {
		t.Fatalf("vote to an open group without retries: %v", err)
	}
	if err := vote(g1, once.ID(), c); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("vote to a group that is not open, without retries: %v, want ErrUnknownGroup", err)
	}
	if n := once.Stats().VoteRetries; n != 0 {
		t.Fatalf("%d votes sent again with VoteRetry off", n)
	}

	// A dead peer (cut off, answering no probe) is asked once.
	ga.WatchPeers([]raft.Server{{ID: a.ID(), Address: a.Addr()}, {ID: c.ID(), Address: c.Addr()}})
	testkit.WaitFor(t, 20*time.Second, "c to answer probes", func() bool {
		return a.Stats().Sent["ping"] >= 3 && a.PeerAnswering(c.ID())
	})
	faults.Partition(string(a.ID()), string(c.ID()))
	testkit.WaitFor(t, 20*time.Second, "the cut peer to stop answering", func() bool { return !a.PeerAnswering(c.ID()) })
	before := a.Stats().VoteRetries
	if err := vote(ga, a.ID(), c); err == nil {
		t.Fatal("a vote through a cut link was granted")
	}
	if n := a.Stats().VoteRetries - before; n != 0 {
		t.Fatalf("a vote to a peer answering no probe was sent again %d times", n)
	}
}

// TestClosingEndsVoteRetries: hashicorp/raft waits for its vote requests
// before its shutdown completes, so a group told that its Raft is closing
// stops sending a vote again at once instead of after VoteRetry (a
// replica removed by a move, or closed, used to wait it out).
func TestClosingEndsVoteRetries(t *testing.T) {
	nodes := newNodes(t, 2, nil, func(c *Config) { c.OpenWait, c.VoteRetry = 50*time.Millisecond, time.Hour })
	a, b := nodes[0], nodes[1]
	ga := mustGroup(t, a, "never-opened")
	voted := make(chan error, 1)
	go func() { voted <- vote(ga, a.ID(), b) }()
	testkit.WaitFor(t, 20*time.Second, "the vote request to a group that is not open sent again", func() bool {
		return a.Stats().VoteRetries > 0
	})
	ga.Closing()
	select {
	case err := <-voted:
		if !errors.Is(err, ErrUnknownGroup) {
			t.Fatalf("vote after Closing: %v, want ErrUnknownGroup", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the vote request was still being sent again 30 s after Closing")
	}
}
