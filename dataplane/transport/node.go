package transport

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

var (
	// ErrUnknownGroup is returned (wrapped) by an RPC to a group that does
	// not exist, or no longer exists, on the receiving broker.
	ErrUnknownGroup = errors.New("unknown raft group")
	// ErrGroupBusy is returned (wrapped) when the receiving group's inbound
	// queue is full.
	ErrGroupBusy = errors.New("raft group busy")
	// ErrTimeout is returned (wrapped) when an RPC got no response in time.
	ErrTimeout = errors.New("raft rpc timed out")
	// ErrClosed is returned (wrapped) by calls on a closed Node or group.
	ErrClosed = errors.New("transport closed")
)

// RemoteError is an error the receiving Raft returned for an RPC.
type RemoteError struct {
	Peer    string // broker id of the receiver
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("raft rpc to %s: %s", e.Peer, e.Message)
}

func (e *wireError) toError(peer string) error {
	switch e.code {
	case codeUnknownGroup:
		return fmt.Errorf("raft rpc to %s: %w", peer, ErrUnknownGroup)
	case codeBusy:
		return fmt.Errorf("raft rpc to %s: %w", peer, ErrGroupBusy)
	case codeTimeout:
		return fmt.Errorf("raft rpc to %s: receiver: %w", peer, ErrTimeout)
	case codeRefused:
		return fmt.Errorf("raft rpc to %s: %w", peer, ErrRefused)
	case codeSeeding:
		return fmt.Errorf("raft rpc to %s: %w", peer, ErrSeeding)
	case codeNoSource:
		return fmt.Errorf("raft rpc to %s: %w", peer, ErrNoSegmentSource)
	}
	if err := e.mirrorError(peer); err != nil {
		return err
	}
	return &RemoteError{Peer: peer, Message: e.msg}
}

// Config configures a Node. Zero values take the defaults named on each
// field.
type Config struct {
	// ID is this broker's id, used as the Raft ServerID of every group.
	// Required.
	ID raft.ServerID
	// ListenAddr is the host:port to listen on ("127.0.0.1:0" in tests).
	// Required.
	ListenAddr string
	// AdvertiseAddr is the address peers dial, used as the Raft
	// ServerAddress of every group. Default: the listener's address.
	AdvertiseAddr string
	// Credentials authenticate this broker to its peers and its peers to
	// it (mutual TLS, see the package doc): the cell CA pool and this
	// broker's certificate, which must name ID. Required: every connection
	// the Node accepts or dials is authenticated.
	Credentials peercert.Credentials
	// Logger receives transport logs. Default: discard.
	Logger *slog.Logger
	// Faults, if set, injects network faults on send (tests only).
	Faults *Faults
	// DialTimeout bounds connecting to a peer. Default 2s.
	DialTimeout time.Duration
	// ControlTimeout bounds a control-lane RPC (heartbeat, votes,
	// TimeoutNow). Default 2s.
	ControlTimeout time.Duration
	// AppendTimeout bounds an AppendEntries RPC, including the time the
	// receiving Raft takes to store the entries. Default 10s.
	AppendTimeout time.Duration
	// WriteTimeout bounds one write system call batch on a connection.
	// Default 10s.
	WriteTimeout time.Duration
	// LivenessWindow is how long a connection whose peer owes it an answer
	// may read nothing at all from it before it is closed as dead (and
	// the next call redials): one call's timeout fails only that call,
	// never the connection every group shares (silence.go). It applies
	// to the control lane; append and mirror lanes wait AppendTimeout
	// longer, the longest a live peer takes to answer an append. Default
	// 2 × ControlTimeout; at least ControlTimeout.
	LivenessWindow time.Duration
	// SnapshotTimeout bounds an InstallSnapshot, on top of 1s per 10 MiB
	// of snapshot data. Default 30s.
	SnapshotTimeout time.Duration
	// MaxFrameSize bounds a frame read or written. Default
	// DefaultMaxFrameSize (80 MiB).
	MaxFrameSize int
	// AppendLanes is the number of append-lane connections per peer; a
	// group always uses the same one. Default 1.
	AppendLanes int
	// PipelineWindow is the number of pipelined AppendEntries a group may
	// have in flight to one peer. Default 2; negative disables pipelining
	// (AppendEntriesPipeline returns ErrPipelineReplicationNotSupported).
	PipelineWindow int
	// Linger is how long idle traffic (heartbeats, AppendEntries without
	// entries, and their responses) may wait so that frames of many groups
	// share one write and one read. Default 5ms; negative disables. It adds
	// at most 2×Linger to a heartbeat round trip, nothing to appends that
	// carry entries or to votes.
	Linger time.Duration
	// ProbeInterval is how often the Node probes each watched peer
	// broker (WatchPeers) with a ping on the control lane. Default 250ms;
	// negative disables probing (no peer is ever reported down).
	ProbeInterval time.Duration
	// DownAfter is how long a watched peer may go without answering a
	// probe before it is reported down (PeerDown, OnPeerDown). Default
	// 1s; at least twice ProbeInterval.
	DownAfter time.Duration
	// InboxSize bounds the RPCs queued for one group before the receiver
	// answers ErrGroupBusy. Default 64.
	InboxSize int
	// OpenWait is how long an RPC for a group this broker has not opened
	// (or whose membership it does not know yet) waits for it before it is
	// answered ErrUnknownGroup: the replicas of a new partition open on
	// the brokers a few milliseconds apart, and the preferred replica's
	// first vote request must not be lost to that. Default half of
	// ControlTimeout, at most 1s; negative answers at once.
	OpenWait time.Duration
	// VoteRetry is how long a vote or pre-vote request that got no answer
	// from the receiving Raft (its group not open yet, the connection
	// lost, no answer in time) is sent again, every 200 ms, while its
	// peer answers probes (vote.go). Default 4s; negative never.
	VoteRetry time.Duration
}

func (c *Config) validate() error {
	if c.ID == "" {
		return errors.New("config: ID is required")
	}
	if len(c.ID) > maxGroupIDLen {
		return fmt.Errorf("config: ID longer than %d bytes", maxGroupIDLen)
	}
	if c.ListenAddr == "" {
		return errors.New("config: ListenAddr is required")
	}
	if c.Credentials.CAs == nil || c.Credentials.Certificate == nil {
		return errors.New("config: Credentials (cell CA pool and broker certificate) are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, 2*time.Second)
	def(&c.ControlTimeout, 2*time.Second)
	def(&c.AppendTimeout, 10*time.Second)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.LivenessWindow, 2*c.ControlTimeout)
	if c.LivenessWindow < c.ControlTimeout {
		return fmt.Errorf("config: LivenessWindow %s is below ControlTimeout %s: one slow call would close the connection every group shares", c.LivenessWindow, c.ControlTimeout)
	}
	def(&c.SnapshotTimeout, 30*time.Second)
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.MaxFrameSize > 1<<30 {
		return errors.New("config: MaxFrameSize above 1 GiB")
	}
	if c.AppendLanes <= 0 {
		c.AppendLanes = 1
	}
	if c.AppendLanes > 16 {
		return errors.New("config: AppendLanes above 16")
	}
	c.PipelineWindow = cmp.Or(c.PipelineWindow, 2)
	c.Linger = cmp.Or(c.Linger, 5*time.Millisecond)
	if c.InboxSize <= 0 {
		c.InboxSize = 64
	}
	c.ProbeInterval = cmp.Or(c.ProbeInterval, 250*time.Millisecond)
	if c.DownAfter <= 0 {
		c.DownAfter = time.Second
	}
	if c.ProbeInterval > 0 && c.DownAfter < 2*c.ProbeInterval {
		return fmt.Errorf("config: DownAfter %s is below twice ProbeInterval %s", c.DownAfter, c.ProbeInterval)
	}
	if c.OpenWait == 0 {
		c.OpenWait = min(c.ControlTimeout/2, time.Second)
	}
	if c.VoteRetry == 0 {
		c.VoteRetry = 4 * time.Second
	}
	return nil
}

// Node is one broker's Raft transport: it owns the listener, the lanes to
// every peer broker and the registry of groups. Create it with New, get a
// raft.Transport per group with Group, and Close it last.
type Node struct {
	cfg    Config
	id     string
	cell   string // the cell of this broker's certificate; peers must share it
	addr   raft.ServerAddress
	ln     net.Listener
	log    *slog.Logger
	faults *Faults
	ctx    context.Context // cancelled by Close; aborts dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Node and its groups start
	stats  nodeStats

	closeOnce sync.Once
	closeErr  error

	// mu guards the fields below. Lock order: lane.mu, then Node.mu;
	// conn.mu and GroupTransport.mu are leaves. Nothing blocks under mu.
	mu     sync.Mutex
	closed bool
	groups map[string]*GroupTransport
	peers  map[raft.ServerAddress]*peer
	conns  map[*conn]struct{}
	snaps  map[net.Conn]struct{} // live snapshot connections
	opened chan struct{}         // closed and replaced when a group opens; see hold
	live   map[raft.ServerID]*liveness
	onDown map[*GroupTransport]func(raft.ServerID, bool)
	// resumedAt is when the watchdog last found that this Node had not
	// run for longer than DownAfter (unix nanos; 0 if never): no answer
	// could be heard meanwhile, so no peer counts as silent before it
	// (liveness.go, heardFrom).
	resumedAt atomic.Int64

	mirror grants // other cells' mirror grants, groups served to them (grant.go, mirror.go)

	// incarnation names this Node's life; it answers every ping with it,
	// so a peer tells a restart from an answer after a pause
	// (liveness.go). Set by New, never changed.
	incarnation string
}

// New listens on cfg.ListenAddr and starts accepting peer connections.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new raft transport: %w", err)
	}
	cell, err := authenticate(&cfg)
	if err != nil {
		return nil, fmt.Errorf("new raft transport: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("new raft transport: listen: %w", err)
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = ln.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, id: string(cfg.ID), cell: cell, addr: raft.ServerAddress(addr), ln: ln,
		log: cfg.Logger, faults: cfg.Faults, ctx: ctx, cancel: cancel,
		groups:      map[string]*GroupTransport{},
		peers:       map[raft.ServerAddress]*peer{},
		conns:       map[*conn]struct{}{},
		snaps:       map[net.Conn]struct{}{},
		opened:      make(chan struct{}),
		live:        map[raft.ServerID]*liveness{},
		incarnation: newIncarnation(),
		onDown:      map[*GroupTransport]func(raft.ServerID, bool){},
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.acceptLoop()
	}()
	if cfg.ProbeInterval > 0 {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.watchdog()
		}()
	}
	return n, nil
}

// ID returns this broker's id.
func (n *Node) ID() raft.ServerID { return n.cfg.ID }

// Addr returns the address peers use for this broker (its ServerAddress).
func (n *Node) Addr() raft.ServerAddress { return n.addr }

// Close closes the listener, every connection and every group, and waits
// for every goroutine the Node started. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		groups := make([]*GroupTransport, 0, len(n.groups))
		for _, g := range n.groups {
			groups = append(groups, g)
		}
		conns := make([]*conn, 0, len(n.conns))
		for c := range n.conns {
			conns = append(conns, c)
		}
		for s := range n.snaps {
			_ = s.Close()
		}
		n.mu.Unlock()
		n.cancel()
		if err := n.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			n.closeErr = fmt.Errorf("close raft transport listener: %w", err)
		}
		for _, g := range groups {
			_ = g.Close()
		}
		for _, c := range conns {
			c.close(ErrClosed)
		}
		n.wg.Wait()
	})
	return n.closeErr
}

// Group registers a Raft group on this Node and returns its transport. The
// transport implements raft.Transport, raft.WithPreVote and raft.WithClose;
// its Close (called by raft.Raft.Shutdown) unregisters the group. It fails
// if the Node is closed or the group id is in use or longer than 255 bytes.
func (n *Node) Group(groupID string) (*GroupTransport, error) {
	if groupID == "" || len(groupID) > maxGroupIDLen {
		return nil, fmt.Errorf("register raft group: id must have 1 to %d bytes", maxGroupIDLen)
	}
	g := &GroupTransport{
		node:    n,
		id:      groupID,
		consume: make(chan raft.RPC),
		inbox:   make(chan inbound, n.cfg.InboxSize),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
		lane:    int(hashString(groupID) % uint32(n.cfg.AppendLanes)),
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("register raft group %q: %w", groupID, ErrClosed)
	}
	if _, ok := n.groups[groupID]; ok {
		return nil, fmt.Errorf("register raft group %q: already registered", groupID)
	}
	n.groups[groupID] = g
	n.openedLocked()
	g.wg.Add(1)
	n.spawnLocked(func() {
		defer g.wg.Done()
		g.serveInbox()
	})
	return g, nil
}

// spawn runs f on a goroutine tracked by the Node's WaitGroup; false (and
// f not run) if the Node is closed, so no Add races Close's Wait.
func (n *Node) spawn(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.spawnLocked(f)
	return true
}

// spawnLocked is spawn with n.mu held and n.closed checked.
func (n *Node) spawnLocked(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

func (n *Node) removeGroup(g *GroupTransport) {
	n.mu.Lock()
	if n.groups[g.id] == g {
		delete(n.groups, g.id)
	}
	delete(n.onDown, g)
	n.mu.Unlock()
}

func (n *Node) lookup(group []byte) *GroupTransport {
	n.mu.Lock()
	g := n.groups[string(group)]
	n.mu.Unlock()
	return g
}

func (n *Node) untrack(c *conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

func (n *Node) trackSnap(nc net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.snaps[nc] = struct{}{}
	return true
}

func (n *Node) untrackSnap(nc net.Conn) {
	n.mu.Lock()
	delete(n.snaps, nc)
	n.mu.Unlock()
	_ = nc.Close()
}

func (n *Node) acceptLoop() {
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() == nil {
				n.log.Error("raft transport accept", "error", err)
			}
			return
		}
		if !n.trackSnap(nc) { // tracked until the hello is read
			_ = nc.Close()
			return
		}
		if !n.spawn(func() { n.handshake(nc) }) {
			n.untrackSnap(nc)
			return
		}
	}
}

// handshake authenticates an accepted connection (see acceptPeer) and
// starts serving it. A connection that fails is closed and logged with the
// remote address and the reason; nothing it sent reaches a group.
func (n *Node) handshake(raw net.Conn) {
	_ = raw.SetDeadline(time.Now().Add(n.cfg.DialTimeout))
	br := bufio.NewReaderSize(raw, 512)
	lane, from, err := readHello(br)
	if err == nil && lane == laneMirror {
		n.serveMirrorConn(raw, br, from) // another cell's broker (mirror.go)
		return
	}
	var nc net.Conn
	if err == nil {
		nc, br, err = n.acceptPeer(raw, br, lane, from)
	}
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("raft transport peer refused", "remote", raw.RemoteAddr().String(), "reason", err.Error())
		}
		n.untrackSnap(raw)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if lane == laneSnapshot {
		defer n.untrackSnap(raw)
		n.serveSnapshot(nc, br, from)
		return
	}
	n.mu.Lock()
	delete(n.snaps, raw)
	n.mu.Unlock()
	c := newConn(n, nc, br, lane, from, false)
	if !c.start() {
		_ = nc.Close()
	}
}

// handleRequest runs on a server connection's read goroutine: it answers
// at once what it can (unknown group, heartbeats) and queues the rest to
// the group, so one slow group never blocks the connection.
func (n *Node) handleRequest(c *conn, f frame) {
	if c.mirror != nil {
		n.handleMirror(c, f) // another cell's broker: mirror reads only
		return
	}
	if f.kind&kindResponse != 0 || f.kind == kindError || f.kind == kindInstallSnapshot || int(f.kind) >= len(n.stats.received) {
		c.close(fmt.Errorf("unexpected frame kind %#x on %s lane", f.kind, c.lane))
		return
	}
	n.stats.received[f.kind].Add(1)
	if f.kind == kindPing {
		// A liveness probe names no group: the connection's mTLS
		// handshake proved the sender a broker of this cell. The answer
		// carries this Node's incarnation in its group field, which a
		// ping answer has no other use for (liveness.go).
		c.reply(kindPing|kindResponse, f.reqID, []byte(n.incarnation), nil, false)
		return
	}
	g := n.lookup(f.group)
	if g == nil || !g.serving() {
		// Perhaps a new group this broker is about to open: see hold.
		if !n.hold(c, f) {
			n.stats.unknownGroup.Add(1)
			c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
		}
		return
	}
	n.dispatch(c, f, g)
}

// dispatch hands a request to its open group g: refused unless the peer
// is a member, heartbeats answered at once, the rest queued.
func (n *Node) dispatch(c *conn, f frame, g *GroupTransport) {
	if err := g.admit(c.peer, f.msg); err != nil {
		n.refuse(c, f, err)
		return
	}
	if f.kind == kindSegmentList || f.kind == kindSegmentRead {
		n.serveSegments(c, f, g)
		return
	}
	if g.refuseWhileSeeding(f) {
		c.replyError(f.reqID, f.group, codeSeeding, "replica is being seeded")
		return
	}
	if f.kind == kindAppendEntries {
		if req := f.msg.(*raft.AppendEntriesRequest); isHeartbeat(req) {
			if fn := g.heartbeatFn.Load(); fn != nil {
				g.heartbeat(c, f, *fn)
				return
			}
		}
	}
	if !g.push(inbound{c: c, f: f}) {
		if g.isClosed() {
			c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
			return
		}
		c.replyError(f.reqID, f.group, codeBusy, "group busy")
	}
}

// isHeartbeat reports whether req has the shape of a hashicorp/raft
// heartbeat (the same test its own NetworkTransport makes).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.Addr
	if len(leader) == 0 {
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// serveSnapshot serves one InstallSnapshot on a dedicated connection: the
// request frame, then Size bytes of data read by the receiving Raft, then
// one response frame.
func (n *Node) serveSnapshot(nc net.Conn, br *bufio.Reader, from string) {
	_ = nc.SetReadDeadline(time.Now().Add(n.cfg.ControlTimeout))
	buf, err := readFrame(br, n.cfg.MaxFrameSize)
	if err != nil {
		n.log.Warn("read install snapshot", "peer", from, "error", err)
		return
	}
	f, err := decodeFrame(buf)
	if err != nil || f.kind != kindInstallSnapshot {
		n.log.Warn("decode install snapshot", "peer", from, "kind", f.kind, "error", err)
		return
	}
	n.stats.received[kindInstallSnapshot].Add(1)
	req := f.msg.(*raft.InstallSnapshotRequest)
	timeout := n.snapshotTimeout(req.Size)
	_ = nc.SetDeadline(time.Now().Add(timeout))
	respond := func(kind uint8, msg any) {
		bufs, _, err := encodeFrame(kind, f.reqID, string(f.group), msg, n.cfg.MaxFrameSize)
		if err == nil {
			_, err = bufs.WriteTo(nc)
		}
		if err != nil {
			n.log.Warn("write install snapshot response", "peer", from, "error", err)
		}
	}
	g := n.lookup(f.group)
	if g == nil {
		n.stats.unknownGroup.Add(1)
		respond(kindError, &wireError{code: codeUnknownGroup, msg: "unknown group"})
		return
	}
	if err := g.admit(from, req); err != nil {
		n.stats.refused.Add(1)
		n.log.Warn("raft rpc refused", "peer", from, "remote", nc.RemoteAddr().String(), "group", string(f.group), "reason", err.Error())
		respond(kindError, &wireError{code: codeRefused, msg: "refused"})
		return
	}
	respond(kindSnapshotAccept, nil)
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: req, Reader: io.LimitReader(br, req.Size), RespChan: respCh}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case g.consume <- rpc:
	case <-g.done:
		respond(kindError, &wireError{code: codeUnknownGroup, msg: "unknown group"})
		return
	case <-timer.C:
		respond(kindError, &wireError{code: codeTimeout, msg: "timeout"})
		return
	}
	select {
	case r := <-respCh:
		if r.Error != nil {
			respond(kindError, &wireError{code: codeGeneric, msg: r.Error.Error()})
			return
		}
		respond(kindInstallSnapshot|kindResponse, r.Response)
	case <-g.done:
	case <-timer.C:
	}
}

func (n *Node) snapshotTimeout(size int64) time.Duration {
	return n.cfg.SnapshotTimeout + time.Duration(size/(10<<20))*time.Second
}

// peer holds the lanes to one peer broker address.
type peer struct {
	addr    raft.ServerAddress
	control *lane
	appends []*lane
}

func (n *Node) peer(addr raft.ServerAddress) *peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.peers[addr]
	if p == nil {
		p = &peer{addr: addr, control: &lane{node: n, addr: addr, kind: laneControl}}
		for range n.cfg.AppendLanes {
			p.appends = append(p.appends, &lane{node: n, addr: addr, kind: laneAppend})
		}
		n.peers[addr] = p
	}
	return p
}

// lane is the dialing side of one connection to a peer, redialed on demand.
type lane struct {
	node *Node
	addr raft.ServerAddress
	kind laneKind

	// mu guards the fields below; it is held while dialing, so callers of
	// one lane wait for one dial (bounded by DialTimeout).
	mu       sync.Mutex
	c        *conn
	lastFail time.Time
	lastErr  error
}

// redialBackoff: after a failed dial, calls fail fast for this long instead
// of every group dialing again.
const redialBackoff = 100 * time.Millisecond

func (l *lane) get(peerID string) (*conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil && !l.c.isClosed() {
		if l.c.peer == peerID {
			return l.c, nil
		}
		// The address now belongs to another broker id: the connection
		// is authenticated as the old one, so it cannot carry this call.
		l.c.close(fmt.Errorf("address %s dialled as broker %s", l.addr, peerID))
		l.lastErr = nil
	}
	l.c = nil
	if l.lastErr != nil && time.Since(l.lastFail) < redialBackoff {
		return nil, l.lastErr
	}
	c, err := l.dial(peerID)
	if err != nil {
		l.lastFail, l.lastErr = time.Now(), err
		return nil, err
	}
	l.lastErr = nil
	l.c = c
	return c, nil
}

func (l *lane) dial(peerID string) (*conn, error) {
	n := l.node
	nc, err := dialPeer(n, l.addr, l.kind, peerID)
	if err != nil {
		return nil, err
	}
	c := newConn(n, nc, bufio.NewReaderSize(nc, 64<<10), l.kind, peerID, true)
	if !c.start() {
		_ = nc.Close()
		return nil, fmt.Errorf("dial %s lane to %s: %w", l.kind, l.addr, ErrClosed)
	}
	return c, nil
}

func hashString(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// Stats are counters since the Node started.
type Stats struct {
	// Sent and Received count RPCs by kind: "append_entries",
	// "heartbeat" (sent only), "request_vote", "request_pre_vote",
	// "timeout_now", "install_snapshot", "ping", "segment_list",
	// "segment_read".
	Sent, Received map[string]uint64
	// UnknownGroup counts RPCs answered with ErrUnknownGroup.
	UnknownGroup uint64
	// Refused counts RPCs answered with ErrRefused.
	Refused uint64
	// Quiesced counts heartbeats answered without sending them
	// (QuiesceHeartbeats); they are not in Sent.
	Quiesced uint64
	// TimedOut counts calls that got no answer within their timeout;
	// each failed alone.
	TimedOut uint64
	// Silent counts connections closed because their peer sent nothing
	// for the liveness window (Config.LivenessWindow).
	Silent uint64
	// VoteRetries counts vote and pre-vote requests sent again after
	// failing without an answer (Config.VoteRetry).
	VoteRetries uint64
	// LaneBytes counts bytes written per lane kind ("control", "append";
	// snapshot data is not counted).
	LaneBytes map[string]uint64
}

type nodeStats struct {
	sent, received [16]atomic.Uint64 // by request kind; heartbeats at 0
	unknownGroup   atomic.Uint64
	refused        atomic.Uint64
	quiesced       atomic.Uint64
	timedOut       atomic.Uint64
	silent         atomic.Uint64
	held           atomic.Int64 // requests waiting for their group to open
	voteRetries    atomic.Uint64
	laneBytes      [5]atomic.Uint64
}

var kindNames = [16]string{
	0:                   "heartbeat",
	kindAppendEntries:   "append_entries",
	kindRequestVote:     "request_vote",
	kindRequestPreVote:  "request_pre_vote",
	kindTimeoutNow:      "timeout_now",
	kindInstallSnapshot: "install_snapshot",
	kindPing:            "ping",
	kindSegmentList:     "segment_list",
	kindSegmentRead:     "segment_read",
}

// Stats returns a snapshot of the Node's counters.
func (n *Node) Stats() Stats {
	s := Stats{Sent: map[string]uint64{}, Received: map[string]uint64{}, LaneBytes: map[string]uint64{}}
	for k, name := range kindNames {
		if name == "" {
			continue
		}
		s.Sent[name] = n.stats.sent[k].Load()
		if k != 0 {
			s.Received[name] = n.stats.received[k].Load()
		}
	}
	s.UnknownGroup = n.stats.unknownGroup.Load()
	s.Refused = n.stats.refused.Load()
	s.Quiesced = n.stats.quiesced.Load()
	s.TimedOut = n.stats.timedOut.Load()
	s.Silent = n.stats.silent.Load()
	s.VoteRetries = n.stats.voteRetries.Load()
	s.LaneBytes[laneControl.String()] = n.stats.laneBytes[laneControl].Load()
	s.LaneBytes[laneAppend.String()] = n.stats.laneBytes[laneAppend].Load()
	return s
}
