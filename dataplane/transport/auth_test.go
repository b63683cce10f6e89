package transport

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// countRPCs registers group id on n with the given membership and counts
// the RPCs its Raft would see (consumed or heartbeats); votes are granted.
func countRPCs(t testing.TB, n *Node, id string, members func() []raft.Server) *atomic.Int64 {
	t.Helper()
	g, err := n.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	g.SetMembers(members)
	var seen atomic.Int64
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		seen.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	})
	done, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done); <-exited; _ = g.Close() })
	go func() {
		defer close(exited)
		for {
			select {
			case rpc := <-g.Consumer():
				seen.Add(1)
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case <-done:
				return
			}
		}
	}()
	return &seen
}

// rawHello is a hello of any version, as a forger would write it.
func rawHello(version byte, lane laneKind, from string) []byte {
	b := append(helloMagic[:], version, byte(lane))
	b = binary.AppendUvarint(b, uint64(len(from)))
	return append(b, from...)
}

// forge connects to addr as a hand-made client: a clear hello of the given
// version claiming broker claimed, then, if cert is set, TLS with cert
// (the server's certificate is not checked) and the hello again; then a
// RequestVote for group "g" whose header names claimed. It reports
// whether a vote response came back.
func forge(t *testing.T, addr string, version byte, claimed string, cert *tls.Certificate) bool {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	hello := rawHello(version, laneControl, claimed)
	if _, err := raw.Write(hello); err != nil {
		return false
	}
	var rw net.Conn = raw
	if cert != nil {
		tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS13})
		if err := tc.Handshake(); err != nil {
			return false
		}
		if _, err := tc.Write(hello); err != nil {
			return false
		}
		rw = tc
	}
	bufs, _, err := encodeFrame(kindRequestVote, 1, "g", &raft.RequestVoteRequest{RPCHeader: header(raft.ServerID(claimed)), Term: 1}, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufs.WriteTo(rw); err != nil {
		return false
	}
	buf, err := readFrame(bufio.NewReader(rw), DefaultMaxFrameSize)
	if err != nil {
		return false // closed (or reset) by the receiver
	}
	f, err := decodeFrame(buf)
	return err == nil && f.kind == kindRequestVote|kindResponse
}

func certOf(t *testing.T, cr peercert.Credentials) *tls.Certificate {
	t.Helper()
	c, err := cr.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAcceptAuthenticates runs hand-made clients against a Node: only the
// one with a certificate of the cell CA naming the broker its hello claims
// reaches the group. Every other is closed with a warning naming its
// remote address, and the group sees nothing of it. The first case is the
// control: were it refused, the others would prove nothing.
func TestAcceptAuthenticates(t *testing.T) {
	logs := &testkit.LogBuffer{}
	n := newNodes(t, 1, nil, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })[0]
	seen := countRPCs(t, n, "g", anyTestBroker)
	other, err := peercert.NewCA("test-cell", 0) // same cell name, another key
	if err != nil {
		t.Fatal(err)
	}
	otherCred, err := other.Credentials("b2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		version  byte
		claimed  string
		cert     *tls.Certificate
		accepted bool
	}{
		{"valid certificate and hello", helloVersion, "b2", certOf(t, testCredentials(t, "b2")), true},
		{"plaintext hello of version 1", 1, "b2", nil, false},
		{"plaintext hello claiming an unknown broker", 1, "nobody", nil, false},
		{"plaintext hello of the current version", helloVersion, "b2", nil, false},
		{"certificate of another CA", helloVersion, "b2", certOf(t, otherCred), false},
		{"no client certificate", helloVersion, "b2", &tls.Certificate{}, false},
		{"member certificate claiming another member", helloVersion, "b3", certOf(t, testCredentials(t, "b2")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := seen.Load()
			got := forge(t, string(n.Addr()), tc.version, tc.claimed, tc.cert)
			if got != tc.accepted {
				t.Fatalf("answered = %v, want %v", got, tc.accepted)
			}
			delivered := seen.Load() - before
			if !tc.accepted && delivered != 0 {
				t.Fatalf("a refused connection delivered %d RPCs to the group", delivered)
			}
			if tc.accepted && delivered != 1 {
				t.Fatalf("the accepted connection delivered %d RPCs, want 1", delivered)
			}
		})
	}
	if s := logs.String(); !strings.Contains(s, "raft transport peer refused") || !strings.Contains(s, "remote=127.0.0.1:") {
		t.Fatalf("refusals not logged with the remote address:\n%s", s)
	}
}

// TestDialAuthenticatesServer dials broker b2 at the address of b3, a
// valid member of the cell: the dialer must refuse b3's certificate, so
// no broker can stand in for another.
func TestDialAuthenticatesServer(t *testing.T) {
	nodes := newNodes(t, 3, nil, nil)
	seen := countRPCs(t, nodes[2], "g", anyTestBroker)
	g := mustGroup(t, nodes[0], "g")
	var resp raft.RequestVoteResponse
	req := &raft.RequestVoteRequest{RPCHeader: header(nodes[0].ID()), Term: 1}
	if err := g.RequestVote(nodes[2].ID(), nodes[2].Addr(), req, &resp); err != nil {
		t.Fatalf("control: vote to b3 at its own address: %v", err)
	}
	err := g.RequestVote(nodes[1].ID(), nodes[2].Addr(), req, &resp)
	if err == nil || !strings.Contains(err.Error(), `names broker "b3", dialled "b2"`) {
		t.Fatalf("vote to b2 at b3's address: err = %v, want a refused certificate", err)
	}
	if n := seen.Load(); n != 1 {
		t.Fatalf("b3's group saw %d RPCs, want only the control's", n)
	}
}

// TestFrameMembership sends RPCs from authenticated brokers to a group
// whose configuration is {b1, b2}: b3, valid in the cell but not a member,
// is refused with ErrRefused and the group never sees its RPCs; so is a
// member whose RPC names another server as its sender.
func TestFrameMembership(t *testing.T) {
	nodes := newNodes(t, 3, nil, nil)
	b1, b2, b3 := nodes[0], nodes[1], nodes[2]
	members := []raft.Server{
		{Suffrage: raft.Voter, ID: b1.ID(), Address: b1.Addr()},
		{Suffrage: raft.Nonvoter, ID: b2.ID(), Address: b2.Addr()},
	}
	seen := countRPCs(t, b1, "g", func() []raft.Server { return members })
	vote := func(from *Node, hdr raft.RPCHeader) error {
		g, err := from.Group("g")
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var resp raft.RequestVoteResponse
		return g.RequestVote(b1.ID(), b1.Addr(), &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1}, &resp)
	}
	hdr := func(n *Node) raft.RPCHeader {
		return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.ID()), Addr: []byte(n.Addr())}
	}
	for _, tc := range []struct {
		name    string
		from    *Node
		hdr     raft.RPCHeader
		refused bool
	}{
		{"non-voter member", b2, hdr(b2), false},
		{"broker outside the configuration", b3, hdr(b3), true},
		{"outsider naming a member as sender", b3, hdr(b2), true},
		{"member naming another member as sender", b2, raft.RPCHeader{ID: []byte(b1.ID())}, true},
		{"member naming another address", b2, raft.RPCHeader{ID: []byte(b2.ID()), Addr: []byte(b3.Addr())}, true},
		{"member with no sender id", b2, raft.RPCHeader{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := seen.Load()
			err := vote(tc.from, tc.hdr)
			if tc.refused != errors.Is(err, ErrRefused) || (!tc.refused && err != nil) {
				t.Fatalf("err = %v, refused want %v", err, tc.refused)
			}
			if d := seen.Load() - before; d != map[bool]int64{true: 0, false: 1}[tc.refused] {
				t.Fatalf("the group saw %d RPCs", d)
			}
		})
	}
	if b1.Stats().Refused == 0 {
		t.Fatal("refusals not counted")
	}
}

// TestNewRequiresCredentials: a Node without credentials, or with a
// certificate naming another broker, does not start.
func TestNewRequiresCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		cred peercert.Credentials
	}{
		{"none", peercert.Credentials{}},
		{"another broker's certificate", testCredentials(t, "b2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := New(Config{ID: "b1", ListenAddr: "127.0.0.1:0", Credentials: tc.cred})
			if err == nil {
				_ = n.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

// TestCertificateReload swaps a Node's certificate while it runs: b2
// starts with a certificate of another CA, which b1 refuses; once the
// cell CA's certificate is set, new connections use it without a restart.
func TestCertificateReload(t *testing.T) {
	other, err := peercert.NewCA("test-cell", 0)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := other.Credentials("b2")
	if err != nil {
		t.Fatal(err)
	}
	cert := &peercert.Reloadable{}
	cert.Set(certOf(t, bad))
	nodes := newNodes(t, 2, nil, func(c *Config) {
		if c.ID == "b2" {
			c.Credentials.Certificate = cert.Get
		}
	})
	seen := countRPCs(t, nodes[1], "g", anyTestBroker)
	g := mustGroup(t, nodes[0], "g")
	vote := func() error {
		var resp raft.RequestVoteResponse
		return g.RequestVote(nodes[1].ID(), nodes[1].Addr(), &raft.RequestVoteRequest{RPCHeader: header(nodes[0].ID()), Term: 1}, &resp)
	}
	if err := vote(); err == nil {
		t.Fatal("vote to a broker with another CA's certificate succeeded")
	}
	cert.Set(certOf(t, testCredentials(t, "b2")))
	testkit.WaitFor(t, 10*time.Second, "a vote once the certificate is replaced", func() bool { return vote() == nil })
	if seen.Load() == 0 {
		t.Fatal("the group saw no RPC")
	}
}
