package raftlog

import (
	"runtime"
	"testing"
)

// TestGatherWaitsForRunnableStores: a store whose goroutine is runnable
// when a round begins joins that round (the round yields to it), and a
// round with no one else about to ask starts after one empty yield.
// GOMAXPROCS 1 makes the order certain: the asking goroutine can run only
// when the round's goroutine yields.
func TestGatherWaitsForRunnableStores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c := &Committer{reqs: make(chan commitReq, 256)}
	first := commitReq{s: &Store{}}
	if got := c.gather([]commitReq{first}); len(got) != 1 {
		t.Fatalf("alone: a round of %d requests, want 1", len(got))
	}
	sent := make(chan struct{})
	go func() {
		c.reqs <- commitReq{s: &Store{}}
		close(sent)
	}()
	got := c.gather([]commitReq{first})
	<-sent
	if len(got) != 2 {
		t.Fatalf("with a store about to ask: a round of %d requests, want 2 (the round did not yield to it)", len(got))
	}
}
