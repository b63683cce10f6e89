package transport

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// TestCellRaftGroups runs 30 real hashicorp/raft groups on three Nodes over
// loopback and checks elections, replication, pre-vote, failover under a
// partition, convergence after healing and fast failure of RPCs to a closed
// group.
func TestCellRaftGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 90 Raft instances")
	}
	const groups = 30
	c := newCell(t, 3, groups, 0, nil)
	c.waitLeaders(60 * time.Second)
	t.Logf("leaders per node after election: %v", c.leaderSpread())

	t.Run("apply commits on every replica", func(t *testing.T) {
		c.applyAll(t, c.groups, "first-", 30*time.Second)
	})

	t.Run("pre-vote is active", func(t *testing.T) {
		var preVotes uint64
		for _, n := range c.nodes {
			preVotes += n.Stats().Received["request_pre_vote"]
		}
		if preVotes == 0 {
			t.Fatal("no RequestPreVote received: hashicorp/raft did not enable pre-vote")
		}
		t.Logf("pre-votes received: %d", preVotes)
	})

	t.Run("isolated leader is replaced and heals", func(t *testing.T) {
		g := c.groups[0]
		old := c.leader(g)
		if old < 0 {
			t.Fatalf("%s has no leader", g)
		}
		id := string(c.nodes[old].ID())
		var led []string
		for _, gg := range c.groups {
			if c.leader(gg) == old {
				led = append(led, gg)
			}
		}
		c.faults.Isolate(id)
		t.Cleanup(c.faults.Heal)
		// Every group the isolated broker led gets a leader among the others.
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("new leaders for the %d groups %s led", len(led), id), func() bool {
			for _, gg := range led {
				if c.leader(gg, old) < 0 {
					return false
				}
			}
			return true
		})
		// The majority side still commits.
		for _, gg := range led[:min(3, len(led))] {
			l := c.leader(gg, old)
			if err := c.rafts[gg][l].Apply([]byte("during-"+gg), 10*time.Second).Error(); err != nil {
				t.Fatalf("apply in %s during partition: %v", gg, err)
			}
		}
		c.faults.Heal()
		testkit.WaitFor(t, 60*time.Second, "every group to converge on one leader after healing", func() bool {
			for _, gg := range c.groups {
				if !c.converged(gg) {
					return false
				}
			}
			return true
		})
		c.applyAll(t, led, "after-", 30*time.Second)
		for _, gg := range led[:min(3, len(led))] {
			for i, f := range c.fsms[gg] {
				if !f.has("during-" + gg) {
					t.Fatalf("%s on node %d lacks the entry committed during the partition", gg, i)
				}
			}
		}
	})

	t.Run("rpc to closed group fails fast", func(t *testing.T) {
		g := c.groups[1]
		// Shut down g's Raft on one follower; its transport closes with it.
		victim := (c.leader(g) + 1) % 3
		if err := c.rafts[g][victim].Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
		from := (victim + 1) % 3
		target := c.nodes[victim]
		for _, tc := range []struct {
			name string
			tr   *GroupTransport
		}{
			{"closed group", c.trans[g][from]},
			{"never registered", mustGroup(t, c.nodes[from], "ghost")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var resp raft.RequestVoteResponse
				err := tc.tr.RequestVote(target.ID(), target.Addr(), &raft.RequestVoteRequest{RPCHeader: header(c.nodes[from].ID()), Term: 1}, &resp)
				if !errors.Is(err, ErrUnknownGroup) {
					t.Fatalf("RequestVote to a group absent on %s: err = %v, want ErrUnknownGroup", target.ID(), err)
				}
			})
		}
		if n := target.Stats().UnknownGroup; n == 0 {
			t.Fatal("receiver counted no unknown-group RPCs")
		}
	})
}

func mustGroup(t testing.TB, n *Node, id string) *GroupTransport {
	t.Helper()
	g, err := n.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	g.SetMembers(anyTestBroker)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func TestGroupRegistry(t *testing.T) {
	nodes := newNodes(t, 1, nil, nil)
	n := nodes[0]
	g := mustGroup(t, n, "a")
	for _, tc := range []struct {
		name, id string
	}{
		{"duplicate", "a"},
		{"empty", ""},
		{"too long", string(make([]byte, 256))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := n.Group(tc.id); err == nil {
				t.Fatalf("Group(%q) succeeded", tc.id)
			}
		})
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := n.Group("a"); err != nil {
		t.Fatalf("re-register after Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := n.Group("b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Group on closed node: %v", err)
	}
}

// TestFaultsPartition checks Faults on plain RPCs: a cut link fails at once
// with ErrLinkDown in both directions and Heal restores it.
func TestFaultsPartition(t *testing.T) {
	f := NewFaults()
	nodes := newNodes(t, 2, f, nil)
	a := serveVotes(t, nodes[0], "g")
	b := serveVotes(t, nodes[1], "g")
	vote := func(from *GroupTransport, to *Node) error {
		var resp raft.RequestVoteResponse
		return from.RequestVote(to.ID(), to.Addr(), &raft.RequestVoteRequest{RPCHeader: header(from.node.ID()), Term: 1}, &resp)
	}
	for _, tc := range []struct {
		name   string
		fault  func()
		wantAB error
		wantBA error
	}{
		{"none", func() {}, nil, nil},
		{"partition", func() { f.Partition("b1", "b2") }, ErrLinkDown, ErrLinkDown},
		{"isolate", func() { f.Isolate("b2") }, ErrLinkDown, ErrLinkDown},
		{"drop all one way", func() { f.SetDropRate("b1", "b2", 1) }, ErrLinkDown, nil},
		{"delay", func() { f.SetDelay("b1", "b2", time.Millisecond) }, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault()
			defer f.Heal()
			if err := vote(a, nodes[1]); !errors.Is(err, tc.wantAB) && !(err == nil && tc.wantAB == nil) {
				t.Fatalf("b1→b2: err = %v, want %v", err, tc.wantAB)
			}
			if err := vote(b, nodes[0]); !errors.Is(err, tc.wantBA) && !(err == nil && tc.wantBA == nil) {
				t.Fatalf("b2→b1: err = %v, want %v", err, tc.wantBA)
			}
		})
	}
}

// serveVotes registers group id on n and grants every RequestVote.
func serveVotes(t testing.TB, n *Node, id string) *GroupTransport {
	t.Helper()
	g := mustGroup(t, n, id)
	done := make(chan struct{})
	exited := make(chan struct{})
	t.Cleanup(func() { close(done); <-exited })
	go func() {
		defer close(exited)
		for {
			select {
			case rpc := <-g.Consumer():
				switch rpc.Command.(type) {
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
				default:
					rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
				}
			case <-done:
				return
			}
		}
	}()
	return g
}
