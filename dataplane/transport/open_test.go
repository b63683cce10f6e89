package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestRPCWaitsForItsGroupToOpen: a vote request sent to a broker a moment
// before it opens the group (a new partition's replicas open on the
// brokers a few milliseconds apart) is delivered once the group opens,
// instead of failing and costing the candidate an election timeout; a
// group that never opens is still ErrUnknownGroup, after OpenWait.
func TestRPCWaitsForItsGroupToOpen(t *testing.T) {
	nodes := newNodes(t, 2, nil, func(c *Config) { c.OpenWait, c.VoteRetry = 20*time.Second, -1 })
	a, b := nodes[0], nodes[1]
	ga := mustGroup(t, a, "new")
	voted := make(chan error, 1)
	go func() {
		var resp raft.RequestVoteResponse
		err := ga.RequestVote(b.ID(), b.Addr(), &raft.RequestVoteRequest{RPCHeader: header(a.ID()), Term: 1}, &resp)
		if err == nil && !resp.Granted {
			err = errors.New("vote not granted")
		}
		voted <- err
	}()
	// Open the group only once the request is waiting for it.
	deadline := time.Now().Add(20 * time.Second)
	for b.stats.held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the vote request never waited for its group")
		}
		time.Sleep(time.Millisecond)
	}
	serveFake(t, b, "new", nil)
	if err := <-voted; err != nil {
		t.Fatalf("vote sent before the group opened: %v", err)
	}
	if n := b.Stats().UnknownGroup; n != 0 {
		t.Fatalf("%d RPCs answered unknown group", n)
	}

	short := newNodes(t, 1, nil, func(c *Config) { c.OpenWait = 50 * time.Millisecond })[0]
	var resp raft.RequestVoteResponse
	err := ga.RequestVote(short.ID(), short.Addr(), &raft.RequestVoteRequest{RPCHeader: header(a.ID()), Term: 1}, &resp)
	if !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("vote to a group that never opens: %v, want ErrUnknownGroup", err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for short.stats.held.Load() != 0 { // the holder exits just after it answers
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still held", short.stats.held.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
