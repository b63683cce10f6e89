package transport

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
	g, b, last := leaderOfFake(t)
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

// TestPipelineTopsUpAppend: a pipelined append carries the entries the
// group's log holds after its own, up to the frame budget, and tells Raft
// so in the request it was given (the next index Raft sends from and the
// follower's match index are read from it). Without it an idle leader's
// pipeline left what one trigger's append did not carry until
// CommitTimeout.
func TestPipelineTopsUpAppend(t *testing.T) {
	nodes := newNodes(t, 2, nil, func(c *Config) { c.MaxFrameSize = 5 << 20 })
	a, b := nodes[0], nodes[1]
	got := make(chan []uint64, 4)
	serveFake(t, b, "g", func(req *raft.AppendEntriesRequest) {
		var idx []uint64
		for _, e := range req.Entries {
			idx = append(idx, e.Index)
		}
		got <- idx
	})
	g := mustGroup(t, a, "g")
	log := bigAppend(1, 1, 100, 100<<10) // entries 1–100 of 100 KiB
	var last atomic.Uint64
	last.Store(100)
	g.SetLocalLog(last.Load, 64, logReader(log))
	p, err := g.AppendEntriesPipeline(b.ID(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(first, n int) []uint64 {
		t.Helper()
		req := bigAppend(1, uint64(first), n, 100<<10)
		f, err := p.AppendEntries(req, new(raft.AppendEntriesResponse))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		sent := <-got
		if k := len(req.Entries); k != len(sent) || req.Entries[k-1].Index != sent[len(sent)-1] {
			t.Fatalf("request holds %d entries, %d were sent: raft would not account for them", k, len(sent))
		}
		if f.Response().LastLog != sent[len(sent)-1] {
			t.Fatalf("answer's last log %d, want %d", f.Response().LastLog, sent[len(sent)-1])
		}
		return sent
	}
	// Four fifths of 5 MiB hold 40 entries of 100 KiB (and their headers):
	// the append of entries 1–8 goes out with 9–40.
	if s := send(1, 8); len(s) != 40 || s[0] != 1 || s[39] != 40 {
		t.Fatalf("append of 1–8 sent %d entries, %d–%d; want 1–40", len(s), s[0], s[len(s)-1])
	}
	// The last of the log: nothing more to add.
	if s := send(97, 4); len(s) != 4 || s[3] != 100 {
		t.Fatalf("append of 97–100 sent %v", s)
	}
	// Entries past a hole in what the log can read are left to Raft.
	last.Store(120)
	if s := send(95, 6); len(s) != 6 || s[5] != 100 {
		t.Fatalf("append of 95–100 with 101 unreadable sent %v", s)
	}
}

// TestPeerOutOfSync: a follower is in sync from the send time of the
// latest append it answered holding all the leader held when that append
// was sent (by a plain or a pipelined append), and out of sync from then
// on while its answers fall short; a follower never heard from is 0.
func TestPeerOutOfSync(t *testing.T) {
	g, b, last := leaderOfFake(t)
	if d := g.PeerOutOfSync(b.ID()); d != 0 {
		t.Fatalf("never heard from: out of sync %v, want 0", d)
	}
	appendTo := func(first uint64, n int) {
		t.Helper()
		var resp raft.AppendEntriesResponse
		if err := g.AppendEntries(b.ID(), b.Addr(), bigAppend(1, first, n, 8), &resp); err != nil {
			t.Fatal(err)
		}
	}
	last.Store(10)
	before := time.Now()
	appendTo(1, 10) // 1–10 of 10: in sync
	inSync := time.Now()
	if d := g.PeerOutOfSync(b.ID()); d > time.Since(before) {
		t.Fatalf("after an append of the whole log: out of sync %v, more than the %v since it was sent", d, time.Since(before))
	}
	time.Sleep(20 * time.Millisecond) // so an append sent now is told apart from the one before
	last.Store(1000)
	appendTo(11, 10) // 11–20 of 1000: short of the log the leader held
	if d, want := g.PeerOutOfSync(b.ID()), time.Since(inSync); d < want {
		t.Fatalf("after an append short of the leader's log: out of sync %v, want at least the %v since it last held it all", d, want)
	}
	// A pipelined append the transport tops up to the leader's end puts
	// it back in sync (the log is within one batch of it, so Raft may
	// pipeline to it).
	last.Store(80)
	log := bigAppend(1, 1, 80, 8)
	g.SetLocalLog(last.Load, 64, logReader(log))
	p, err := g.AppendEntriesPipeline(b.ID(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sent := time.Now()
	f, err := p.AppendEntries(bigAppend(1, 21, 8, 8), new(raft.AppendEntriesResponse))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if f.Response().LastLog != 80 {
		t.Fatalf("pipelined append of 21–28 answered with last log %d, want 80 (topped up)", f.Response().LastLog)
	}
	if d := g.PeerOutOfSync(b.ID()); d > time.Since(sent) {
		t.Fatalf("after a pipelined append to the log's end: out of sync %v, more than the %v since it was sent", d, time.Since(sent))
	}
}

// logReader reads the entries of log (numbered from 1), as a replica's
// LogStore would for SetLocalLog.
func logReader(log *raft.AppendEntriesRequest) func(uint64, *raft.Log) error {
	return func(i uint64, out *raft.Log) error {
		if i < 1 || i > uint64(len(log.Entries)) {
			return raft.ErrLogNotFound
		}
		*out = *log.Entries[i-1]
		return nil
	}
}

// leaderOfFake is group "g" on one node, with a fake follower on another
// (serveFake) and a last log index the test sets (SetLocalLog, maxLag 64,
// no reader).
func leaderOfFake(t *testing.T) (*GroupTransport, *Node, *atomic.Uint64) {
	t.Helper()
	nodes := newNodes(t, 2, nil, nil)
	serveFake(t, nodes[1], "g", nil)
	g := mustGroup(t, nodes[0], "g")
	last := new(atomic.Uint64)
	g.SetLocalLog(last.Load, 64, nil)
	return g, nodes[1], last
}
