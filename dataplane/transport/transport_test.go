package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// fakeRaft answers a group's RPCs like a follower would, without Raft: it
// acknowledges appends (LastLog = last entry index) after hold returns,
// grants votes and reads snapshots fully. Heartbeats take the fast path.
type fakeRaft struct {
	g        *GroupTransport
	hold     func(*raft.AppendEntriesRequest) // called before answering an append
	snapshot chan []byte                      // receives installed snapshot data
}

func serveFake(t testing.TB, n *Node, id string, hold func(*raft.AppendEntriesRequest)) *fakeRaft {
	t.Helper()
	f := &fakeRaft{g: mustGroup(t, n, id), hold: hold, snapshot: make(chan []byte, 1)}
	f.g.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: true}, nil)
	})
	done, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done); <-exited })
	go func() {
		defer close(exited)
		for {
			select {
			case rpc := <-f.g.Consumer():
				f.answer(rpc)
			case <-done:
				return
			}
		}
	}()
	return f
}

func (f *fakeRaft) answer(rpc raft.RPC) {
	switch req := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		if f.hold != nil {
			f.hold(req)
		}
		resp := &raft.AppendEntriesResponse{Term: req.Term, Success: true}
		if n := len(req.Entries); n > 0 {
			resp.LastLog = req.Entries[n-1].Index
		}
		rpc.Respond(resp, nil)
	case *raft.RequestVoteRequest:
		rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
	case *raft.InstallSnapshotRequest:
		data, err := io.ReadAll(rpc.Reader)
		if err == nil {
			select {
			case f.snapshot <- data:
			default:
			}
		}
		rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: err == nil}, err)
	default:
		rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
	}
}

func bigAppend(term, first uint64, entries, size int) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{RPCHeader: testHeader(), Term: term, PrevLogEntry: first - 1, PrevLogTerm: term, LeaderCommitIndex: first - 1}
	data := bytes.Repeat([]byte{'x'}, size)
	for i := range entries {
		req.Entries = append(req.Entries, &raft.Log{Index: first + uint64(i), Term: term, Type: raft.LogCommand, Data: data})
	}
	return req
}

func heartbeatReq(term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{RPCHeader: testHeader(), Term: term, Leader: []byte("leader")}
}

// TestHeartbeatsNotBehindAppend holds an 8 MiB AppendEntries inside the
// receiving group (as a slow disk would) and requires heartbeats of that
// group and of another group on the same peer pair to complete before the
// append is released. Were heartbeats queued behind appends anywhere (one
// connection, one receive queue), they could not complete and the test
// would fail at its deadline: the assertion is on order, not on time.
func TestHeartbeatsNotBehindAppend(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	got, release := make(chan struct{}), make(chan struct{})
	serveFake(t, b, "big", func(req *raft.AppendEntriesRequest) {
		if len(req.Entries) > 0 {
			close(got)
			<-release
		}
	})
	serveFake(t, b, "other", nil)
	bigA, otherA := mustGroup(t, a, "big"), mustGroup(t, a, "other")

	appendErr := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		err := bigA.AppendEntries(b.ID(), b.Addr(), bigAppend(1, 1, 8, 1<<20), &resp)
		if err == nil && (!resp.Success || resp.LastLog != 8) {
			err = fmt.Errorf("append response %+v", resp)
		}
		appendErr <- err
	}()
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("8 MiB append never reached the receiving group")
	}
	for i := range 100 {
		for _, g := range []*GroupTransport{bigA, otherA} {
			var resp raft.AppendEntriesResponse
			if err := g.AppendEntries(b.ID(), b.Addr(), heartbeatReq(1), &resp); err != nil || !resp.Success {
				close(release)
				t.Fatalf("heartbeat %d of %s while an append is held: %v %+v", i, g.ID(), err, resp)
			}
		}
	}
	select {
	case err := <-appendErr:
		t.Fatalf("append finished before release: %v", err)
	default:
	}
	close(release)
	select {
	case err := <-appendErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("append not answered after release")
	}
	st := a.Stats()
	if st.LaneBytes["append"] < 8<<20 || st.LaneBytes["control"] >= 1<<20 {
		t.Fatalf("lane bytes %v: want the append on the append lane and heartbeats on the control lane", st.LaneBytes)
	}
	if st.Sent["heartbeat"] != 200 {
		t.Fatalf("sent %d heartbeats, want 200", st.Sent["heartbeat"])
	}
}

// TestPipeline sends appends through a pipeline and checks that futures
// come back in send order and that a closed pipeline refuses appends.
func TestPipeline(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	serveFake(t, b, "g", nil)
	p, err := mustGroup(t, a, "g").AppendEntriesPipeline(b.ID(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const n = 50
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := p.AppendEntries(bigAppend(1, uint64(i+1), 1, 100), &raft.AppendEntriesResponse{}); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			if got := f.Response().LastLog; got != uint64(i+1) {
				t.Fatalf("future %d answers index %d: out of order", i, got)
			}
			if f.Request().Entries[0].Index != uint64(i+1) {
				t.Fatalf("future %d carries request %d", i, f.Request().Entries[0].Index)
			}
		case <-timeout:
			t.Fatalf("only %d of %d futures", i, n)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendEntries(bigAppend(1, 99, 1, 1), &raft.AppendEntriesResponse{}); !errors.Is(err, raft.ErrPipelineShutdown) {
		t.Fatalf("append on closed pipeline: %v", err)
	}
}

func TestPipelineDisabled(t *testing.T) {
	nodes := newNodes(t, 1, nil, func(c *Config) { c.PipelineWindow = -1 })
	g := mustGroup(t, nodes[0], "g")
	if _, err := g.AppendEntriesPipeline("b2", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("err = %v", err)
	}
}

func TestInstallSnapshot(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	fake := serveFake(t, b, "g", nil)
	data := bytes.Repeat([]byte("snapshot"), 400_000)
	for _, tc := range []struct {
		name    string
		group   string
		wantErr error
	}{
		{"streams data", "g", nil},
		{"unknown group", "nope", ErrUnknownGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGroup(t, a, tc.group)
			var resp raft.InstallSnapshotResponse
			req := &raft.InstallSnapshotRequest{RPCHeader: testHeader(), Term: 2, LastLogIndex: 10, LastLogTerm: 2, Size: int64(len(data))}
			err := g.InstallSnapshot(b.ID(), b.Addr(), req, &resp, bytes.NewReader(data))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || !resp.Success || resp.Term != 2 {
				t.Fatalf("install snapshot: %v %+v", err, resp)
			}
			select {
			case got := <-fake.snapshot:
				if !bytes.Equal(got, data) {
					t.Fatalf("receiver read %d bytes, want %d equal bytes", len(got), len(data))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("receiver got no snapshot")
			}
		})
	}
}

// TestCloseWaitsForGoroutines closes a Node with an RPC blocked in a peer
// and checks that the call fails and Close returns (it waits for every
// goroutine of the Node).
func TestCloseWaitsForGoroutines(t *testing.T) {
	stuck := make(chan struct{})
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	defer close(stuck)
	serveFake(t, b, "g", func(*raft.AppendEntriesRequest) { <-stuck })
	g := mustGroup(t, a, "g")
	errc := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		errc <- g.AppendEntries(b.ID(), b.Addr(), bigAppend(1, 1, 1, 10), &resp)
	}()
	testkit.WaitFor(t, 10*time.Second, "append to arrive", func() bool { return b.Stats().Received["append_entries"] == 1 })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("append succeeded after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append still blocked after Close")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestConcurrentCallsShareConnection runs many concurrent RPCs of many
// groups over one lane, so callers keep finding a write in progress and
// hand their frames over to the connection's writer; every call must be
// answered. (A lost hand-off once left frames queued forever.)
func TestConcurrentCallsShareConnection(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	a, b := nodes[0], nodes[1]
	const groups, calls = 20, 200
	var senders []*GroupTransport
	for i := range groups {
		id := fmt.Sprintf("g%d", i)
		serveVotes(t, b, id)
		senders = append(senders, mustGroup(t, a, id))
	}
	errc := make(chan error, groups)
	for _, g := range senders {
		go func() {
			for range calls {
				var resp raft.RequestVoteResponse
				if err := g.RequestVote(b.ID(), b.Addr(), &raft.RequestVoteRequest{RPCHeader: header(a.ID()), Term: 1}, &resp); err != nil || !resp.Granted {
					errc <- fmt.Errorf("group %s: %v %+v", g.ID(), err, resp)
					return
				}
			}
			errc <- nil
		}()
	}
	for range groups {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
