package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Mirror read RPCs serve a partition to the brokers of another cell that
// mirror it for a tenant's move (dataplane/DESIGN.md, "Tenant moves
// across cells"). They come on a lane of their own (laneMirror), the one
// lane another cell's broker may open: its client certificate must chain
// to the peer CA of a cell holding a grant (SetMirrorGrants) and name
// that cell. Such a connection carries only MirrorRead, MirrorState and
// MirrorSnapshot, for groups this broker serves to mirrors
// (SetMirrorSource) whose topic the cell was granted; anything else (a
// Raft RPC, a segment RPC, a ping) is answered ErrMirrorOnly, a group of
// another topic ErrNotGranted. A changed or revoked grant closes the
// cell's connections. Calls are answered on a goroutine of their own, as
// segment RPCs are: a disk read never holds up the connection.

// maxMirrorRead bounds the bytes one MirrorRead asks for (a larger first
// batch is still answered whole, within Config.MaxFrameSize).
const maxMirrorRead = 8 << 20

// maxMirrorInflight bounds the mirror reads a Node answers at once (for
// every other cell together); more are answered ErrGroupBusy. A puller
// has one read in flight at a time.
const maxMirrorInflight = 64

var (
	// ErrMirrorOnly is returned (wrapped) by an RPC other than the mirror
	// reads sent on a mirror connection.
	ErrMirrorOnly = errors.New("mirror connection: only the mirror read rpcs are served")
	// ErrNotGranted is returned (wrapped) when the calling cell holds no
	// grant for the group's topic, or none at all.
	ErrNotGranted = errors.New("mirror: not granted")
	// ErrMirrorOutOfRange is returned (wrapped) by a MirrorRead below the
	// source's log start; a MirrorSource returns it (wrapped) for that.
	ErrMirrorOutOfRange = errors.New("mirror: offset out of range")
	// ErrMirrorSource is returned (wrapped) when the source failed
	// otherwise; the cause is in the source broker's log only.
	ErrMirrorSource = errors.New("mirror: source failed")
)

// MirrorNotLeaderError says the replica asked does not lead its group;
// Leader is the leader's server id, empty if unknown. A MirrorSource
// returns it, and the caller gets it back (Peer set).
type MirrorNotLeaderError struct {
	Peer   string
	Leader raft.ServerID
}

func (e *MirrorNotLeaderError) Error() string {
	if e.Leader == "" {
		return fmt.Sprintf("mirror rpc to %s: not the leader; leader unknown", e.Peer)
	}
	return fmt.Sprintf("mirror rpc to %s: not the leader; leader is %s", e.Peer, e.Leader)
}

// MirrorSource answers the mirror reads of one group.
type MirrorSource interface {
	// MirrorRead returns whole raw batches from offset, up to maxBytes
	// (at least one batch if any lies below the high watermark).
	MirrorRead(offset int64, maxBytes int) ([]byte, error)
	// MirrorState is the partition's log start, high watermark and fence.
	MirrorState() (MirrorState, error)
	// MirrorSnapshot is the encoded mirror start
	// (raftlog.EncodeMirrorStart).
	MirrorSnapshot() ([]byte, error)
}

type servedSource struct {
	tenant, topic string
	src           MirrorSource
}

// SetMirrorSource serves group (of topic id topic of tenant) to granted
// mirrors from src; a nil src stops serving it.
func (n *Node) SetMirrorSource(group, tenant, topic string, src MirrorSource) {
	m := &n.mirror
	m.mu.Lock()
	defer m.mu.Unlock()
	if src == nil {
		delete(m.sources, group)
		return
	}
	if m.sources == nil {
		m.sources = map[string]servedSource{}
	}
	m.sources[group] = servedSource{tenant: tenant, topic: topic, src: src}
}

// mirrorConn marks a connection of the mirror lane: the other cell and,
// on the accepting side, the generation of the grant it was admitted by.
type mirrorConn struct {
	cell string
	gen  uint64
}

// serveMirrorConn authenticates a connection whose clear hello named the
// mirror lane and serves it.
func (n *Node) serveMirrorConn(raw net.Conn, br *bufio.Reader, claimed string) {
	var cell, broker string
	var gen uint64
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert, // verified against the grants below
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return n.cfg.Credentials.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			var err error
			cell, broker, gen, err = n.verifyMirrorClient(cs.PeerCertificates)
			return err
		},
	}
	fail := func(err error) {
		n.mirror.refusedConns.Add(1)
		if n.ctx.Err() == nil {
			n.log.Warn("mirror client refused", "remote", raw.RemoteAddr().String(), "reason", err.Error())
		}
		n.untrackSnap(raw)
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	tc := tls.Server(&prefixConn{Conn: raw, r: br}, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		fail(fmt.Errorf("tls handshake: %w", err))
		return
	}
	tbr := bufio.NewReaderSize(tc, 16<<10)
	lane2, claimed2, err := readHello(tbr)
	switch {
	case err != nil:
		fail(fmt.Errorf("hello inside tls: %w", err))
		return
	case lane2 != laneMirror || claimed2 != claimed:
		fail(fmt.Errorf("hello inside tls (%s, %q) differs from the clear one (%s, %q)", lane2, claimed2, laneMirror, claimed))
		return
	case claimed != broker:
		fail(fmt.Errorf("hello claims broker %q, certificate names %q", claimed, broker))
		return
	}
	_ = raw.SetDeadline(time.Time{})
	n.mu.Lock()
	delete(n.snaps, raw)
	n.mu.Unlock()
	c := newConn(n, &peerConn{Conn: tc, raw: raw}, tbr, laneMirror, cell+"/"+broker, false)
	c.mirror = &mirrorConn{cell: cell, gen: gen}
	if !c.start() {
		_ = raw.Close()
		return
	}
	n.log.Info("mirror client admitted", "cell", cell, "broker", broker, "remote", raw.RemoteAddr().String())
	// A grant revoked between the check and start: see granted, which
	// refuses the connection's first call and closes it.
}

// handleMirror answers a request read on a mirror connection.
func (n *Node) handleMirror(c *conn, f frame) {
	refuse := func(code uint8, msg string, err error) {
		n.mirror.refused.Add(1)
		n.log.Warn("mirror rpc refused", "peer", c.peer, "group", string(f.group), "kind", f.kind, "reason", err.Error())
		c.replyError(f.reqID, f.group, code, msg)
	}
	switch f.kind {
	case kindMirrorRead, kindMirrorState, kindMirrorSnapshot:
	default:
		refuse(codeMirrorOnly, "only mirror reads are served to another cell", fmt.Errorf("kind %#x: %w", f.kind, ErrMirrorOnly))
		return
	}
	m := &n.mirror
	m.mu.Lock()
	s, ok := m.sources[string(f.group)]
	m.mu.Unlock()
	if !ok {
		revoked, err := m.granted(c.mirror.cell, c.mirror.gen, "", "")
		if revoked {
			refuse(codeNotGranted, "not granted", err)
			c.close(err)
			return
		}
		c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
		return
	}
	if revoked, err := m.granted(c.mirror.cell, c.mirror.gen, s.tenant, s.topic); err != nil {
		refuse(codeNotGranted, "not granted", err)
		if revoked {
			c.close(err)
		}
		return
	}
	if m.inflight.Add(1) > maxMirrorInflight {
		m.inflight.Add(-1)
		c.replyError(f.reqID, f.group, codeBusy, "busy")
		return
	}
	if !n.spawn(func() {
		defer m.inflight.Add(-1)
		n.serveMirror(c, f, s.src)
	}) {
		m.inflight.Add(-1)
		c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
	}
}

// serveMirror answers one admitted mirror read from src.
func (n *Node) serveMirror(c *conn, f frame, src MirrorSource) {
	var resp any
	var err error
	switch req := f.msg.(type) {
	case *MirrorReadRequest:
		var b []byte
		b, err = src.MirrorRead(req.Offset, int(min(req.Max, maxMirrorRead)))
		resp = &MirrorReadResponse{Data: b}
	case *MirrorStateRequest:
		var st MirrorState
		st, err = src.MirrorState()
		if !st.Fenced {
			st.FencedEnd = 0
		}
		resp = &MirrorStateResponse{MirrorState: st}
	case *MirrorSnapshotRequest:
		var b []byte
		b, err = src.MirrorSnapshot()
		resp = &MirrorSnapshotResponse{Data: b}
	}
	var nl *MirrorNotLeaderError
	switch {
	case err == nil:
		n.mirror.served.Add(1)
		c.reply(f.kind|kindResponse, f.reqID, f.group, resp, false)
	case errors.As(err, &nl):
		c.replyError(f.reqID, f.group, codeNotLeader, string(nl.Leader))
	case errors.Is(err, ErrMirrorOutOfRange):
		c.replyError(f.reqID, f.group, codeOutOfRange, "offset out of range")
	default:
		// What another cell sees is the kind of failure, not its cause.
		n.log.Warn("mirror rpc failed", "peer", c.peer, "group", string(f.group), "error", err.Error())
		c.replyError(f.reqID, f.group, codeMirrorError, "source failed")
	}
}

// mirrorError is the error of a mirror answer's code, nil for a code of
// another RPC.
func (e *wireError) mirrorError(peer string) error {
	switch e.code {
	case codeNotLeader:
		return &MirrorNotLeaderError{Peer: peer, Leader: raft.ServerID(e.msg)}
	case codeNotGranted:
		return fmt.Errorf("mirror rpc to %s: %w", peer, ErrNotGranted)
	case codeMirrorOnly:
		return fmt.Errorf("mirror rpc to %s: %w", peer, ErrMirrorOnly)
	case codeOutOfRange:
		return fmt.Errorf("mirror rpc to %s: %w", peer, ErrMirrorOutOfRange)
	case codeMirrorError:
		return fmt.Errorf("mirror rpc to %s: %w", peer, ErrMirrorSource)
	}
	return nil
}
