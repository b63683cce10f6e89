package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// MirrorClient calls the mirror read RPCs of the brokers of another cell
// (the source of a move) from this Node's broker, authenticated by this
// broker's certificate. One connection per source broker, dialled on
// demand and redialled after it fails; the Node tracks them, so its Close
// closes them too.
type MirrorClient struct {
	node *Node
	cell string         // the source cell
	cas  *x509.CertPool // the source cell's peer CA

	// mu guards the fields below.
	mu     sync.Mutex
	closed bool
	lanes  map[raft.ServerAddress]*mirrorLane
}

// MirrorClient returns a client of the brokers of cell, whose
// certificates must chain to cas and name cell.
func (n *Node) MirrorClient(cell string, cas *x509.CertPool) (*MirrorClient, error) {
	switch {
	case cell == "":
		return nil, errors.New("new mirror client: the source cell is required")
	case cell == n.cell:
		return nil, fmt.Errorf("new mirror client: cell %q is this broker's own", cell)
	case cas == nil:
		return nil, errors.New("new mirror client: the source cell's CA pool is required")
	}
	return &MirrorClient{node: n, cell: cell, cas: cas, lanes: map[raft.ServerAddress]*mirrorLane{}}, nil
}

// Close closes the client's connections. It is idempotent.
func (m *MirrorClient) Close() error {
	m.mu.Lock()
	m.closed = true
	lanes := m.lanes
	m.lanes = map[raft.ServerAddress]*mirrorLane{}
	m.mu.Unlock()
	for _, l := range lanes {
		l.mu.Lock()
		if l.c != nil {
			l.c.close(ErrClosed)
		}
		l.mu.Unlock()
	}
	return nil
}

// Read asks broker id at addr for raw batches of group from offset, at
// most maxBytes (at most 8 MiB; a larger first batch comes whole).
func (m *MirrorClient) Read(ctx context.Context, id raft.ServerID, addr raft.ServerAddress, group string, offset int64, maxBytes int) ([]byte, error) {
	if offset < 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("mirror read at %d of %d bytes: out of range", offset, maxBytes)
	}
	msg, err := m.call(ctx, id, addr, group, kindMirrorRead, &MirrorReadRequest{Offset: offset, Max: uint64(min(maxBytes, maxMirrorRead))})
	if err != nil {
		return nil, err
	}
	return msg.(*MirrorReadResponse).Data, nil
}

// State asks broker id at addr for group's MirrorState.
func (m *MirrorClient) State(ctx context.Context, id raft.ServerID, addr raft.ServerAddress, group string) (MirrorState, error) {
	msg, err := m.call(ctx, id, addr, group, kindMirrorState, &MirrorStateRequest{})
	if err != nil {
		return MirrorState{}, err
	}
	return msg.(*MirrorStateResponse).MirrorState, nil
}

// Snapshot asks broker id at addr for group's encoded mirror start.
func (m *MirrorClient) Snapshot(ctx context.Context, id raft.ServerID, addr raft.ServerAddress, group string) ([]byte, error) {
	msg, err := m.call(ctx, id, addr, group, kindMirrorSnapshot, &MirrorSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	return msg.(*MirrorSnapshotResponse).Data, nil
}

// call sends one request and waits for its answer, at most the Node's
// AppendTimeout or ctx's deadline, whichever is first.
func (m *MirrorClient) call(ctx context.Context, id raft.ServerID, addr raft.ServerAddress, group string, kind uint8, req any) (any, error) {
	c, err := m.conn(id, addr)
	if err != nil {
		return nil, err
	}
	reqID, cl, err := c.send(kind, group, req)
	if err != nil {
		return nil, fmt.Errorf("mirror rpc to %s: %w", id, err)
	}
	timeout := m.node.cfg.AppendTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(0, time.Until(d)))
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return nil, r.err
		}
		if mirrorKindOf(r.msg) != kind {
			return nil, fmt.Errorf("mirror rpc to %s: response of type %T to request kind %d", id, r.msg, kind)
		}
		return r.msg, nil
	case <-t.C:
		c.timedOut(reqID)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("mirror rpc to %s: %w", id, ctx.Err())
		}
		return nil, fmt.Errorf("mirror rpc to %s after %s: %w", id, timeout, ErrTimeout)
	case <-ctx.Done():
		c.forget(reqID)
		return nil, fmt.Errorf("mirror rpc to %s: %w", id, ctx.Err())
	}
}

// conn is the live connection to broker id at addr, dialled if needed.
func (m *MirrorClient) conn(id raft.ServerID, addr raft.ServerAddress) (*conn, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("mirror rpc to %s: %w", id, ErrClosed)
	}
	l := m.lanes[addr]
	if l == nil {
		l = &mirrorLane{}
		m.lanes[addr] = l
	}
	m.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil && !l.c.isClosed() {
		if l.c.peer == string(id) {
			return l.c, nil
		}
		l.c.close(fmt.Errorf("address %s dialled as broker %s", addr, id))
		l.lastErr = nil
	}
	l.c = nil
	if l.lastErr != nil && time.Since(l.lastFail) < redialBackoff {
		return nil, l.lastErr
	}
	c, err := m.dial(id, addr)
	if err != nil {
		l.lastFail, l.lastErr = time.Now(), err
		return nil, err
	}
	l.c, l.lastErr = c, nil
	return c, nil
}

// mirrorLane is the connection to one source broker address.
type mirrorLane struct {
	// mu guards the fields below; held while dialling.
	mu       sync.Mutex
	c        *conn
	lastFail time.Time
	lastErr  error
}

// dial connects to source broker id: clear hello on the mirror lane, TLS
// with the server's certificate required to chain to the source cell's CA
// and name that cell and id, the hello again inside TLS.
func (m *MirrorClient) dial(id raft.ServerID, addr raft.ServerAddress) (*conn, error) {
	n := m.node
	raw, err := n.dialTCP(addr)
	if err != nil {
		return nil, fmt.Errorf("dial mirror lane to %s at %s: %w", id, addr, err)
	}
	fail := func(err error) (*conn, error) {
		_ = raw.Close()
		return nil, fmt.Errorf("dial mirror lane to %s at %s: %w", id, addr, err)
	}
	_ = raw.SetDeadline(time.Now().Add(n.cfg.DialTimeout))
	if err := writeHello(raw, laneMirror, n.id); err != nil {
		return fail(err)
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by VerifyConnection: the identity is the URI, not the host
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return n.cfg.Credentials.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return m.verifyServer(cs.PeerCertificates, id) },
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fail(fmt.Errorf("tls handshake: %w", err))
	}
	if err := writeHello(tc, laneMirror, n.id); err != nil {
		return fail(err)
	}
	_ = raw.SetDeadline(time.Time{})
	pc := &peerConn{Conn: tc, raw: raw}
	c := newConn(n, pc, bufio.NewReaderSize(pc, 64<<10), laneMirror, string(id), true)
	c.mirror = &mirrorConn{cell: m.cell}
	if !c.start() {
		_ = raw.Close()
		return nil, fmt.Errorf("dial mirror lane to %s: %w", id, ErrClosed)
	}
	return c, nil
}

func (m *MirrorClient) verifyServer(certs []*x509.Certificate, id raft.ServerID) error {
	if len(certs) == 0 {
		return errors.New("source broker sent no certificate")
	}
	if err := verifyChain(certs, m.cas, x509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("verify source broker certificate: %w", err)
	}
	cell, broker, err := peercert.Identity(certs[0])
	if err != nil {
		return err
	}
	if cell != m.cell || broker != string(id) {
		return fmt.Errorf("source broker certificate names broker %q of cell %q, dialled %q of %q", broker, cell, id, m.cell)
	}
	return nil
}

// MirrorStats are counters of the mirror lane since the Node started.
type MirrorStats struct {
	Served, Refused, RefusedConns uint64
}

// MirrorStats returns the Node's mirror lane counters.
func (n *Node) MirrorStats() MirrorStats {
	return MirrorStats{Served: n.mirror.served.Load(), Refused: n.mirror.refused.Load(), RefusedConns: n.mirror.refusedConns.Load()}
}

// mirrorKindOf is the request kind a mirror response answers, 0 for
// another message.
func mirrorKindOf(msg any) uint8 {
	switch msg.(type) {
	case *MirrorReadResponse:
		return kindMirrorRead
	case *MirrorStateResponse:
		return kindMirrorState
	case *MirrorSnapshotResponse:
		return kindMirrorSnapshot
	}
	return 0
}
