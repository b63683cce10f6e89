package transport

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// memSource is a MirrorSource over bytes in memory; the transport is what
// is under test here (dataplane/mirror tests it over real replicas).
type memSource struct {
	mu      sync.Mutex
	data    []byte
	st      MirrorState
	snap    []byte
	err     error // returned by every call while set
	lastMax int
	block   chan struct{} // MirrorState waits for it to close, if set
}

func (s *memSource) MirrorRead(off int64, max int) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastMax = max
	if s.err != nil {
		return nil, s.err
	}
	if off < s.st.LogStart {
		return nil, fmt.Errorf("read at %d: %w", off, ErrMirrorOutOfRange)
	}
	end := min(int(off)+max, len(s.data))
	return bytes.Clone(s.data[off:end]), nil
}

func (s *memSource) MirrorState() (MirrorState, error) {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st, s.err
}

func (s *memSource) MirrorSnapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.err
}

func (s *memSource) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// mirrorCells is a source broker of cell-a serving two groups (topics t1
// and t2 of tenant ten) and client brokers of cell-b and cell-c, each cell
// with its own CA.
type mirrorCells struct {
	src        *Node
	srcCA, bCA *peercert.CA
	b, c       *Node
	t1, t2     *memSource
	bClient    *MirrorClient
	cClient    *MirrorClient
	grantB     MirrorGrant
}

func cellNode(t *testing.T, ca *peercert.CA, id string) *Node {
	t.Helper()
	cr, err := ca.Credentials(id)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{ID: raft.ServerID(id), ListenAddr: "127.0.0.1:0", Credentials: cr, ProbeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func newMirrorCells(t *testing.T) *mirrorCells {
	t.Helper()
	mk := func(cell string) *peercert.CA {
		ca, err := peercert.NewCA(cell, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	aCA, bCA, cCA := mk("cell-a"), mk("cell-b"), mk("cell-c")
	m := &mirrorCells{srcCA: aCA, bCA: bCA, src: cellNode(t, aCA, "a1"), b: cellNode(t, bCA, "b1"), c: cellNode(t, cCA, "c1")}
	m.t1 = &memSource{data: []byte("0123456789"), st: MirrorState{LogStart: 2, HighWatermark: 10, Fenced: true, FencedEnd: 10}, snap: []byte("snapshot")}
	m.t2 = &memSource{data: []byte("secret"), st: MirrorState{HighWatermark: 6}}
	m.src.SetMirrorSource("t1/0", "ten", "t1", m.t1)
	m.src.SetMirrorSource("t2/0", "ten", "t2", m.t2)
	m.grantB = MirrorGrant{Cell: "cell-b", Tenant: "ten", Topics: []string{"t1"}, CAs: []*x509.Certificate{bCA.Cert}}
	if err := m.src.SetMirrorGrants([]MirrorGrant{m.grantB}); err != nil {
		t.Fatal(err)
	}
	var err error
	if m.bClient, err = m.b.MirrorClient("cell-a", aCA.Pool()); err != nil {
		t.Fatal(err)
	}
	if m.cClient, err = m.c.MirrorClient("cell-a", aCA.Pool()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.bClient.Close(); _ = m.cClient.Close() })
	return m
}

// connected makes one state call from cell b to the source (so the
// mirror connection is open) and returns that connection.
func (m *mirrorCells) connected(ctx context.Context, t *testing.T) *conn {
	t.Helper()
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0"); err != nil {
		t.Fatal(err)
	}
	c, err := m.bClient.conn("a1", m.src.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mirrorCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMirrorGrantedReads(t *testing.T) {
	m := newMirrorCells(t)
	ctx, id, addr := mirrorCtx(t), raft.ServerID("a1"), m.src.Addr()
	b, err := m.bClient.Read(ctx, id, addr, "t1/0", 4, 3)
	if err != nil || string(b) != "456" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if _, err := m.bClient.Read(ctx, id, addr, "t1/0", 4, 1<<30); err != nil {
		t.Fatal(err)
	}
	if m.t1.lastMax != maxMirrorRead {
		t.Fatalf("source asked for %d bytes, want the bound %d", m.t1.lastMax, maxMirrorRead)
	}
	st, err := m.bClient.State(ctx, id, addr, "t1/0")
	if err != nil || st != m.t1.st {
		t.Fatalf("state: %+v, %v; want %+v", st, err, m.t1.st)
	}
	snap, err := m.bClient.Snapshot(ctx, id, addr, "t1/0")
	if err != nil || string(snap) != "snapshot" {
		t.Fatalf("snapshot: %q, %v", snap, err)
	}
	if _, err := m.bClient.Read(ctx, id, addr, "t1/0", 1, 3); !errors.Is(err, ErrMirrorOutOfRange) {
		t.Fatalf("read below the log start: %v, want ErrMirrorOutOfRange", err)
	}
	m.t1.fail(&MirrorNotLeaderError{Leader: "a2"})
	var nl *MirrorNotLeaderError
	if _, err := m.bClient.State(ctx, id, addr, "t1/0"); !errors.As(err, &nl) || nl.Leader != "a2" {
		t.Fatalf("state on a follower: %v, want not leader with leader a2", err)
	}
	m.t1.fail(errors.New("disk on fire at /var/lib/sluice"))
	if _, err := m.bClient.State(ctx, id, addr, "t1/0"); !errors.Is(err, ErrMirrorSource) || bytes.Contains([]byte(err.Error()), []byte("/var/lib")) {
		t.Fatalf("failed source: %v, want ErrMirrorSource without the cause", err)
	}
	if _, err := m.bClient.State(ctx, id, addr, "t9/0"); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("state of a group not served: %v, want ErrUnknownGroup", err)
	}
}

func TestMirrorRefusesTopicNotGranted(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	before := m.src.MirrorStats()
	for _, call := range []func() error{
		func() error { _, err := m.bClient.Read(ctx, "a1", m.src.Addr(), "t2/0", 0, 100); return err },
		func() error { _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t2/0"); return err },
		func() error { _, err := m.bClient.Snapshot(ctx, "a1", m.src.Addr(), "t2/0"); return err },
	} {
		if err := call(); !errors.Is(err, ErrNotGranted) {
			t.Fatalf("call for a topic not granted: %v, want ErrNotGranted", err)
		}
	}
	if got := m.src.MirrorStats(); got.Refused != before.Refused+3 || got.Served != before.Served {
		t.Fatalf("stats %+v after three refused calls (before %+v)", got, before)
	}
	// The granted topic is still served on the same connection.
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0"); err != nil {
		t.Fatal(err)
	}
}

func TestMirrorRefusesCellWithoutGrant(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	for _, group := range []string{"t1/0", "t2/0"} {
		if _, err := m.cClient.State(ctx, "a1", m.src.Addr(), group); err == nil {
			t.Fatalf("a cell without a grant read %s", group)
		}
	}
	if st := m.src.MirrorStats(); st.RefusedConns == 0 || st.Served != 0 {
		t.Fatalf("stats %+v: want refused connections and nothing served", st)
	}
	// A certificate of the granted cell's name from another CA is refused
	// too: the grant binds the CA, not the name.
	fakeB, err := peercert.NewCA("cell-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	impostor := cellNode(t, fakeB, "b9")
	ic, err := impostor.MirrorClient("cell-a", m.srcCA.Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if _, err := ic.State(ctx, "a1", m.src.Addr(), "t1/0"); err == nil {
		t.Fatal("a certificate of another CA naming the granted cell was admitted")
	}
	// A broker of the granted cell cannot open a Raft lane: its
	// certificate is not of the source cell.
	if _, err := dialPeer(m.b, m.src.Addr(), laneControl, "a1"); err == nil {
		t.Fatal("a broker of another cell opened a raft lane")
	}
}

func TestMirrorConnectionRefusesRaftRPCs(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	c := m.connected(ctx, t)
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b1"), Addr: []byte(m.b.Addr())}
	for _, tc := range []struct {
		name string
		kind uint8
		msg  any
	}{
		{"append entries", kindAppendEntries, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 9, Entries: []*raft.Log{{Index: 1, Term: 9, Data: []byte("x")}}}},
		{"heartbeat", kindAppendEntries, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 9, Leader: []byte("x")}},
		{"request vote", kindRequestVote, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 9}},
		{"pre vote", kindRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 9}},
		{"timeout now", kindTimeoutNow, &raft.TimeoutNowRequest{RPCHeader: hdr}},
		{"segment list", kindSegmentList, &SegmentListRequest{RPCHeader: hdr, To: 10}},
		{"segment read", kindSegmentRead, &SegmentReadRequest{RPCHeader: hdr, Max: 10}},
		{"ping", kindPing, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, cl, err := c.send(tc.kind, "t1/0", tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-cl.ch:
				if !errors.Is(r.err, ErrMirrorOnly) {
					t.Fatalf("answer %v, %v; want ErrMirrorOnly", r.msg, r.err)
				}
			case <-ctx.Done():
				c.forget(id)
				t.Fatal("no answer")
			}
		})
	}
	if c.isClosed() {
		t.Fatal("refusing the rpcs closed the connection")
	}
	if m.src.MirrorStats().Served != 1 {
		t.Fatalf("stats %+v: only the first state call may be served", m.src.MirrorStats())
	}
}

func TestMirrorRevokedGrantClosesConnection(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	c := m.connected(ctx, t)
	// The same grants again keep the connection.
	if err := m.src.SetMirrorGrants([]MirrorGrant{m.grantB}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0"); err != nil || c.isClosed() {
		t.Fatalf("unchanged grants: %v, closed %v", err, c.isClosed())
	}
	if err := m.src.SetMirrorGrants(nil); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the revoked cell's connection to close", c.isClosed)
	testkit.WaitFor(t, 10*time.Second, "a new call to fail", func() bool {
		_, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0")
		return err != nil && !errors.Is(err, ErrClosed)
	})
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0"); err == nil {
		t.Fatal("a revoked cell read the state")
	}
	// Granted again, it reads again.
	if err := m.src.SetMirrorGrants([]MirrorGrant{m.grantB}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the granted cell to read again", func() bool {
		_, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0")
		return err == nil
	})
}

func TestMirrorGrantTopicRemovedClosesConnection(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	g := m.grantB
	g.Topics = []string{"t1", "t2"}
	if err := m.src.SetMirrorGrants([]MirrorGrant{g}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t2/0"); err != nil {
		t.Fatal(err)
	}
	c, _ := m.bClient.conn("a1", m.src.Addr())
	if err := m.src.SetMirrorGrants([]MirrorGrant{m.grantB}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the connection to close when a topic is revoked", c.isClosed)
	testkit.WaitFor(t, 10*time.Second, "the revoked topic to be refused", func() bool {
		_, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t2/0")
		return errors.Is(err, ErrNotGranted)
	})
}

func TestSetMirrorGrantsChecks(t *testing.T) {
	m := newMirrorCells(t)
	for _, tc := range []struct {
		name string
		g    MirrorGrant
	}{
		{"own cell", MirrorGrant{Cell: "cell-a", Tenant: "ten", Topics: []string{"t1"}, CAs: []*x509.Certificate{m.srcCA.Cert}}},
		{"no cell", MirrorGrant{Tenant: "ten", Topics: []string{"t1"}, CAs: []*x509.Certificate{m.bCA.Cert}}},
		{"no tenant", MirrorGrant{Cell: "cell-b", Topics: []string{"t1"}, CAs: []*x509.Certificate{m.bCA.Cert}}},
		{"no CA", MirrorGrant{Cell: "cell-b", Tenant: "ten", Topics: []string{"t1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.src.SetMirrorGrants([]MirrorGrant{tc.g}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	ws := wire.MirrorGrants{{Cell: "cell-b", TenantID: "ten", Topics: []string{"t1"}, PeerCA: string(m.bCA.CertPEM())}}
	gs, err := GrantsFromWire(ws)
	if err != nil || len(gs) != 1 || gs[0].Cell != "cell-b" || !reflect.DeepEqual(gs[0].Topics, []string{"t1"}) || !gs[0].CAs[0].Equal(m.bCA.Cert) {
		t.Fatalf("grants from wire: %+v, %v", gs, err)
	}
	ws[0].PeerCA = "junk"
	if _, err := GrantsFromWire(ws); !errors.Is(err, wire.ErrGrantBadCA) {
		t.Fatalf("bad CA: %v", err)
	}
}

func TestMirrorBoundsReadsInFlight(t *testing.T) {
	m := newMirrorCells(t)
	ctx := mirrorCtx(t)
	block := make(chan struct{})
	m.t1.mu.Lock()
	m.t1.block = block
	m.t1.mu.Unlock()
	errs := make(chan error, maxMirrorInflight+8)
	for range maxMirrorInflight + 8 {
		go func() {
			_, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0")
			errs <- err
		}()
	}
	// The calls beyond the bound are answered at once, before any
	// blocked one returns.
	for range 8 {
		if err := <-errs; !errors.Is(err, ErrGroupBusy) {
			t.Fatalf("call beyond the bound: %v, want ErrGroupBusy", err)
		}
	}
	close(block)
	for range maxMirrorInflight {
		if err := <-errs; err != nil {
			t.Fatalf("call within the bound: %v", err)
		}
	}
	if _, err := m.bClient.State(ctx, "a1", m.src.Addr(), "t1/0"); err != nil {
		t.Fatal(err)
	}
}
