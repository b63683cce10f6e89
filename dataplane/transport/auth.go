package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// ErrRefused is returned (wrapped) by an RPC the receiver refused to hand
// to its group: the sender is not a member of the group's configuration,
// or the RPC names another server as its sender.
var ErrRefused = errors.New("raft rpc refused")

// authenticate checks this Node's own certificate at New: it must name
// cfg.ID, and its cell becomes the only cell peers may belong to.
func authenticate(cfg *Config) (cellID string, err error) {
	c, err := cfg.Credentials.Certificate()
	if err != nil {
		return "", fmt.Errorf("config: certificate: %w", err)
	}
	if c == nil || len(c.Certificate) == 0 {
		return "", errors.New("config: certificate: empty")
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return "", fmt.Errorf("config: certificate: %w", err)
	}
	cell, broker, err := peercert.Identity(leaf)
	if err != nil {
		return "", fmt.Errorf("config: certificate: %w", err)
	}
	if broker != string(cfg.ID) {
		return "", fmt.Errorf("config: certificate names broker %q, not ID %q", broker, cfg.ID)
	}
	return cell, nil
}

// serverTLS is the TLS configuration of accepted connections: a client
// certificate chained to the cell CA is required; the broker id it names
// is checked against the hello by handshake.
func (n *Node) serverTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  n.cfg.Credentials.CAs,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return n.cfg.Credentials.Certificate()
		},
	}
}

// clientTLS is the TLS configuration of a connection dialled to broker
// peerID. Host name verification is off because a broker is identified by
// the id in its certificate, not by the address it was reached at:
// VerifyConnection checks the chain to the cell CA and that id instead.
func (n *Node) clientTLS(peerID string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by VerifyConnection, see above
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return n.cfg.Credentials.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := n.verifyPeer(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if id != peerID {
				return fmt.Errorf("peer certificate names broker %q, dialled %q", id, peerID)
			}
			return nil
		},
	}
}

// verifyPeer verifies a peer's certificate chain against the cell CA and
// returns the broker id it names, which must be of this Node's cell.
func (n *Node) verifyPeer(certs []*x509.Certificate, usage x509.ExtKeyUsage) (string, error) {
	if len(certs) == 0 {
		return "", errors.New("peer sent no certificate")
	}
	if err := verifyChain(certs, n.cfg.Credentials.CAs, usage); err != nil {
		return "", fmt.Errorf("verify peer certificate: %w", err)
	}
	cell, broker, err := peercert.Identity(certs[0])
	if err != nil {
		return "", err
	}
	if cell != n.cell {
		return "", fmt.Errorf("peer certificate is of cell %q, not %q", cell, n.cell)
	}
	return broker, nil
}

// peerConn is an authenticated connection. Close closes the TCP connection
// at once: the TLS close_notify could block on a peer that stopped reading.
type peerConn struct {
	*tls.Conn
	raw net.Conn
}

func (p *peerConn) Close() error { return p.raw.Close() }

// prefixConn reads through the buffered reader that read the hello, so no
// byte it buffered past the hello is lost to the TLS handshake.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// acceptPeer authenticates an accepted connection whose clear hello
// (lane, claimed) was read from br: TLS with a client certificate chained
// to the cell CA, then the same hello again inside TLS, and the claimed
// broker id must be the certificate's. The clear hello exists so that
// tools in the path (the chaos proxy) can tell lanes and brokers apart;
// the copy inside TLS binds it to the authenticated session.
func (n *Node) acceptPeer(raw net.Conn, br *bufio.Reader, lane laneKind, claimed string) (net.Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	tc := tls.Server(&prefixConn{Conn: raw, r: br}, n.serverTLS())
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("tls handshake: %w", err)
	}
	id, err := n.verifyPeer(tc.ConnectionState().PeerCertificates, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, nil, err
	}
	tbr := bufio.NewReaderSize(tc, 64<<10)
	lane2, claimed2, err := readHello(tbr)
	if err != nil {
		return nil, nil, fmt.Errorf("hello inside tls: %w", err)
	}
	if lane2 != lane || claimed2 != claimed {
		return nil, nil, fmt.Errorf("hello inside tls (%s, %q) differs from the clear one (%s, %q)", lane2, claimed2, lane, claimed)
	}
	if claimed != id {
		return nil, nil, fmt.Errorf("hello claims broker %q, certificate names %q", claimed, id)
	}
	return &peerConn{Conn: tc, raw: raw}, tbr, nil
}

// verifyChain verifies the leaf certs[0] against roots for usage, with the
// rest of certs as intermediates. Peer, grant and mirror checks all verify
// a chain this way before reading the identity the leaf names.
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage},
	})
	return err
}

// dialTCP opens the TCP connection a lane starts on, with Nagle's
// algorithm off: frames are small and latency matters more than packing.
func (n *Node) dialTCP(addr raft.ServerAddress) (net.Conn, error) {
	d := net.Dialer{Timeout: n.cfg.DialTimeout}
	raw, err := d.DialContext(n.ctx, "tcp", string(addr))
	if err != nil {
		return nil, err
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return raw, nil
}

// dialPeer connects to broker peerID at addr: clear hello, TLS with the
// server's certificate required to name peerID, hello again inside TLS.
func dialPeer(n *Node, addr raft.ServerAddress, kind laneKind, peerID string) (net.Conn, error) {
	raw, err := n.dialTCP(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s lane to %s: %w", kind, addr, err)
	}
	fail := func(err error) (net.Conn, error) {
		_ = raw.Close()
		return nil, fmt.Errorf("dial %s lane to %s at %s: %w", kind, peerID, addr, err)
	}
	_ = raw.SetDeadline(time.Now().Add(n.cfg.DialTimeout))
	if err := writeHello(raw, kind, n.id); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	tc := tls.Client(raw, n.clientTLS(peerID))
	if err := tc.HandshakeContext(ctx); err != nil {
		return fail(fmt.Errorf("tls handshake: %w", err))
	}
	if err := writeHello(tc, kind, n.id); err != nil {
		return fail(err)
	}
	_ = raw.SetDeadline(time.Time{})
	return &peerConn{Conn: tc, raw: raw}, nil
}

// SetMembers tells the group where to read its current Raft configuration
// (voters and non-voters). Every request for the group is checked against
// it before Raft sees it: the authenticated peer must be a member, and the
// server id the RPC names as its sender (and its address, where the
// configuration has one) must be the peer's. Until SetMembers is called
// every request is refused. partition.Open calls it for its replicas; see
// RaftMembers.
func (g *GroupTransport) SetMembers(fn func() []raft.Server) {
	g.members.Store(&fn)
	g.node.groupOpened()
}

// RaftMembers returns the servers of r's latest configuration (committed
// or not, so a server being added is admitted), or initial while r is nil
// or its configuration is empty: a replica of a new group that waits for
// the leader to send it the configuration must admit that leader. r is
// read on each call, so it may be set after the group starts serving.
//
// Every RPC is checked against the configuration as it is now: a member
// removed from the group is refused from its next RPC on. hashicorp/raft
// (v1.8) answers GetConfiguration from an atomically stored copy of its
// latest configuration, without a round trip through its main loop, so the
// read costs a small allocation and never waits for Raft storing entries
// (TestMembersReadWhileRaftStores). A cache refreshed in the background
// would cost an idle group a goroutine per RPC for nothing.
func RaftMembers(r func() *raft.Raft, initial []raft.Server) func() []raft.Server {
	return raftMembers(func() configurationGetter {
		if ra := r(); ra != nil {
			return ra
		}
		return nil
	}, initial)
}

// configurationGetter is the part of *raft.Raft RaftMembers reads.
type configurationGetter interface {
	GetConfiguration() raft.ConfigurationFuture
}

func raftMembers(r func() configurationGetter, initial []raft.Server) func() []raft.Server {
	return func() []raft.Server {
		ra := r()
		if ra == nil {
			return initial
		}
		if s := ra.GetConfiguration().Configuration().Servers; len(s) > 0 {
			return s
		}
		return initial
	}
}

// admit decides whether a request from the authenticated broker peer may
// be handed to the group's Raft.
func (g *GroupTransport) admit(peer string, msg any) error {
	fn := g.members.Load()
	if fn == nil {
		return errors.New("group membership not known yet")
	}
	var member *raft.Server
	for _, s := range (*fn)() {
		if string(s.ID) == peer {
			member = &s
			break
		}
	}
	if member == nil {
		return fmt.Errorf("broker %q is not in the group's configuration", peer)
	}
	h, ok := msg.(raft.WithRPCHeader)
	if !ok {
		return fmt.Errorf("rpc %T has no header", msg)
	}
	hdr := h.GetRPCHeader()
	if string(hdr.ID) != peer {
		return fmt.Errorf("rpc names server %q as its sender, peer is %q", hdr.ID, peer)
	}
	addrs := [][]byte{hdr.Addr}
	switch req := msg.(type) {
	case *raft.AppendEntriesRequest:
		addrs = append(addrs, req.Leader)
	case *raft.RequestVoteRequest:
		addrs = append(addrs, req.Candidate)
	case *raft.InstallSnapshotRequest:
		addrs = append(addrs, req.Leader)
	}
	if member.Address == "" {
		return nil
	}
	for _, a := range addrs {
		if len(a) > 0 && raft.ServerAddress(a) != member.Address {
			return fmt.Errorf("rpc names address %q for %q, the configuration has %q", a, peer, member.Address)
		}
	}
	return nil
}

// refuse answers a request the group must not see, and counts it.
func (n *Node) refuse(c *conn, f frame, err error) {
	n.stats.refused.Add(1)
	n.log.Warn("raft rpc refused", "peer", c.peer, "remote", c.nc.RemoteAddr().String(), "group", string(f.group), "reason", err.Error())
	c.replyError(f.reqID, f.group, codeRefused, "refused")
}
