package transport

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// TestPipelineRefusedToFollowerBehind: a group refuses an append pipeline
// to a follower whose last AppendEntries answer put it more than one batch
// (SetLocalLog's maxLag) behind the group's own log, so hashicorp/raft
// catches it up with plain AppendEntries (which loop until it has
// everything) instead of a pipeline an idle leader feeds one batch per
// CommitTimeout; and it allows one to a follower within a batch, or of
// which it has heard nothing.
func TestPipelineRefusedToFollowerBehind(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	serveFake(t, b, "g", nil)
	g := mustGroup(t, a, "g")
	var last atomic.Uint64
	g.SetLocalLog(last.Load, 64)
	last.Store(1000)
	open := func() error {
		p, err := g.AppendEntriesPipeline(b.ID(), b.Addr())
		if err == nil {
			_ = p.Close()
		}
		return err
	}
	if err := open(); err != nil {
		t.Fatalf("pipeline to a follower never heard from: %v", err)
	}
	var resp raft.AppendEntriesResponse
	if err := g.AppendEntries(b.ID(), b.Addr(), bigAppend(1, 1, 10, 8), &resp); err != nil || resp.LastLog != 10 {
		t.Fatalf("append: %v, last log %d", err, resp.LastLog)
	}
	if err := open(); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline to a follower at 10 of 1000: %v, want ErrPipelineReplicationNotSupported", err)
	}
	last.Store(10 + 64)
	if err := open(); err != nil {
		t.Fatalf("pipeline to a follower one batch behind: %v", err)
	}
}
