package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// GroupTransport is the raft.Transport of one Raft group on a Node. Its
// ServerID is the broker id and its ServerAddress the Node's address, shared
// by every group of the broker.
type GroupTransport struct {
	node        *Node
	id          string
	lane        int           // index of the append lane this group uses
	consume     chan raft.RPC // unbuffered, read by raft.Raft
	inbox       chan inbound  // requests waiting for serveInbox
	done        chan struct{} // closed by Close
	closeOnce   sync.Once
	closing     chan struct{} // closed by Closing or Close: no more vote retries
	closingOnce sync.Once
	wg          sync.WaitGroup // serveInbox
	heartbeatFn atomic.Pointer[func(raft.RPC)]
	progress    sync.Map                             // raft.ServerID → *peerProgress; see PeerLastLog
	local       atomic.Pointer[localLog]             // see SetLocalLog
	members     atomic.Pointer[func() []raft.Server] // see SetMembers
	segments    atomic.Pointer[SegmentSource]        // see SetSegmentSource
	seeding     atomic.Bool                          // see SetSeeding
	quietFor    atomic.Int64                         // nanos; see QuiesceHeartbeats
	voteRefused atomic.Pointer[func(term uint64)]    // see OnVoteRefused

	// mu guards closed against pushes racing Close.
	mu     sync.RWMutex
	closed bool
}

var (
	_ raft.Transport   = (*GroupTransport)(nil)
	_ raft.WithPreVote = (*GroupTransport)(nil)
	_ raft.WithClose   = (*GroupTransport)(nil)
)

// inbound is a request waiting for the group's Raft.
type inbound struct {
	c *conn
	f frame
}

// ID returns the group id.
func (g *GroupTransport) ID() string { return g.id }

// Consumer implements raft.Transport.
func (g *GroupTransport) Consumer() <-chan raft.RPC { return g.consume }

// LocalAddr implements raft.Transport.
func (g *GroupTransport) LocalAddr() raft.ServerAddress { return g.node.addr }

// EncodePeer implements raft.Transport.
func (g *GroupTransport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer implements raft.Transport.
func (g *GroupTransport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler implements raft.Transport. Heartbeats for the group
// are then handled on the control connection's read goroutine, never queued
// behind appends.
func (g *GroupTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.heartbeatFn.Store(nil)
		return
	}
	g.heartbeatFn.Store(&cb)
}

// Close implements raft.WithClose: it unregisters the group (peers' RPCs to
// it then fail with ErrUnknownGroup), fails its calls in progress and waits
// for its goroutine. It is idempotent.
func (g *GroupTransport) Close() error {
	g.Closing()
	g.closeOnce.Do(func() {
		g.node.removeGroup(g)
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.done)
		g.wg.Wait()
	})
	return nil
}

// Closing says the group's Raft is about to shut down: a vote request being
// sent again (retryVote) returns its last error now. hashicorp/raft waits
// for its vote requests before it closes the transport, so without this a
// shutdown would wait out VoteRetry. Idempotent; Close implies it.
func (g *GroupTransport) Closing() {
	g.closingOnce.Do(func() { close(g.closing) })
}

func (g *GroupTransport) isClosed() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// AppendEntries implements raft.Transport. Heartbeats go on the control
// lane, everything else on the group's append lane; a heartbeat, or an
// empty append repeating what the follower holds, to a quiescent follower
// is answered without sending it (quiesce).
func (g *GroupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	hb := isHeartbeat(args)
	if (hb || len(args.Entries) == 0) && g.quiesce(id, args, resp) {
		return nil
	}
	p := g.node.peer(target)
	l, kind, timeout := p.appends[g.lane], uint8(kindAppendEntries), g.node.cfg.AppendTimeout
	if hb {
		l, timeout = p.control, g.node.cfg.ControlTimeout
		g.node.stats.sent[0].Add(1)
	} else {
		g.node.stats.sent[kind].Add(1)
	}
	sent, end := time.Now(), g.logEnd()
	msg, err := g.roundTrip(id, l, kind, args, timeout)
	if err != nil {
		return err
	}
	*resp = *msg.(*raft.AppendEntriesResponse)
	g.noteProgress(id, args, resp, sent, end)
	return nil
}

// RequestVote implements raft.Transport.
func (g *GroupTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.seeding.Load() {
		return fmt.Errorf("request vote from %s: %w", id, ErrSeeding)
	}
	return g.retryVote(id, func() error { return controlRPC(g, id, target, kindRequestVote, args, resp) })
}

// RequestPreVote implements raft.WithPreVote.
func (g *GroupTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.seeding.Load() {
		return fmt.Errorf("request pre-vote from %s: %w", id, ErrSeeding)
	}
	return g.retryVote(id, func() error { return controlRPC(g, id, target, kindRequestPreVote, args, resp) })
}

// TimeoutNow implements raft.Transport.
func (g *GroupTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return controlRPC(g, id, target, kindTimeoutNow, args, resp)
}

// controlRPC sends a small RPC on the control lane and copies the answer,
// which the codec decodes as a *Resp for this kind, into resp.
func controlRPC[Resp any](g *GroupTransport, id raft.ServerID, target raft.ServerAddress, kind byte, args any, resp *Resp) error {
	g.node.stats.sent[kind].Add(1)
	msg, err := g.roundTrip(id, g.node.peer(target).control, kind, args, g.node.cfg.ControlTimeout)
	if err != nil {
		return err
	}
	*resp = *msg.(*Resp)
	return nil
}

// preSend applies injected faults for a request to peer id.
func (g *GroupTransport) preSend(id raft.ServerID) error {
	d, err := g.node.faults.check(g.node.id, string(id))
	if err != nil {
		return fmt.Errorf("raft rpc to %s: %w", id, err)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-g.done:
			return fmt.Errorf("raft rpc to %s: group %q: %w", id, g.id, ErrClosed)
		}
	}
	return nil
}

// send applies faults, gets the lane's connection and queues the request.
func (g *GroupTransport) send(id raft.ServerID, l *lane, kind uint8, args any) (*conn, uint64, *call, error) {
	if g.isClosed() {
		return nil, 0, nil, fmt.Errorf("raft rpc to %s: group %q: %w", id, g.id, ErrClosed)
	}
	if err := g.preSend(id); err != nil {
		return nil, 0, nil, err
	}
	c, err := l.get(string(id))
	if err != nil {
		return nil, 0, nil, fmt.Errorf("raft rpc to %s: %w", id, err)
	}
	reqID, cl, err := c.send(kind, g.id, args)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("raft rpc to %s: %w", id, err)
	}
	return c, reqID, cl, nil
}

// wait waits for the response of a call sent with send.
func (g *GroupTransport) wait(c *conn, reqID uint64, cl *call, kind uint8, timeout time.Duration, stop <-chan struct{}) (any, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return nil, r.err
		}
		if kindOf(r.msg) != kind {
			return nil, fmt.Errorf("raft rpc to %s: response of type %T to request kind %d", c.peer, r.msg, kind)
		}
		return r.msg, nil
	case <-t.C:
		c.timedOut(reqID)
		return nil, fmt.Errorf("raft rpc to %s after %s: %w", c.peer, timeout, ErrTimeout)
	case <-g.done:
		c.forget(reqID)
		return nil, fmt.Errorf("raft rpc to %s: group %q: %w", c.peer, g.id, ErrClosed)
	case <-stop:
		c.forget(reqID)
		return nil, raft.ErrPipelineShutdown
	}
}

func kindOf(msg any) uint8 {
	switch msg.(type) {
	case *raft.AppendEntriesResponse:
		return kindAppendEntries
	case *raft.RequestVoteResponse:
		return kindRequestVote
	case *raft.RequestPreVoteResponse:
		return kindRequestPreVote
	case *raft.TimeoutNowResponse:
		return kindTimeoutNow
	case *raft.InstallSnapshotResponse:
		return kindInstallSnapshot
	case *SegmentListResponse:
		return kindSegmentList
	case *SegmentReadResponse:
		return kindSegmentRead
	}
	return 0
}

func (g *GroupTransport) roundTrip(id raft.ServerID, l *lane, kind uint8, args any, timeout time.Duration) (any, error) {
	c, reqID, cl, err := g.send(id, l, kind, args)
	if err != nil {
		return nil, err
	}
	return g.wait(c, reqID, cl, kind, timeout, nil)
}

// InstallSnapshot implements raft.Transport on a dedicated connection, so
// snapshot data never shares a connection with other RPCs.
func (g *GroupTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	n := g.node
	n.stats.sent[kindInstallSnapshot].Add(1)
	if g.isClosed() {
		return fmt.Errorf("install snapshot to %s: group %q: %w", id, g.id, ErrClosed)
	}
	if err := g.preSend(id); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	bufs, _, err := encodeFrame(kindInstallSnapshot, 1, g.id, args, n.cfg.MaxFrameSize)
	if err != nil {
		return fmt.Errorf("install snapshot to %s: %w", id, err)
	}
	nc, err := dialPeer(n, target, laneSnapshot, string(id))
	if err != nil {
		return fmt.Errorf("install snapshot to %s: %w", id, err)
	}
	if !n.trackSnap(nc) {
		_ = nc.Close()
		return fmt.Errorf("install snapshot to %s: %w", id, ErrClosed)
	}
	defer n.untrackSnap(nc)
	// Close the connection if the group closes meanwhile.
	stop, exited := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-exited }()
	go func() {
		defer close(exited)
		select {
		case <-g.done:
			_ = nc.Close()
		case <-stop:
		}
	}()
	_ = nc.SetDeadline(time.Now().Add(n.snapshotTimeout(args.Size)))
	if _, err := bufs.WriteTo(nc); err != nil {
		return fmt.Errorf("install snapshot to %s: write header: %w", id, err)
	}
	br := bufio.NewReader(nc)
	// The receiver accepts (or refuses) before any data is sent, so a
	// refusal is not lost in a reset of a connection still being written.
	if _, err := readSnapshotFrame(br, n.cfg.MaxFrameSize, id, kindSnapshotAccept); err != nil {
		return err
	}
	if _, err := io.CopyN(nc, data, args.Size); err != nil {
		return fmt.Errorf("install snapshot to %s: write data: %w", id, err)
	}
	f, err := readSnapshotFrame(br, n.cfg.MaxFrameSize, id, kindInstallSnapshot|kindResponse)
	if err != nil {
		return err
	}
	*resp = *f.msg.(*raft.InstallSnapshotResponse)
	return nil
}

// readSnapshotFrame reads one frame of the given kind from a snapshot
// connection; an error frame becomes the peer's error.
func readSnapshotFrame(br *bufio.Reader, maxFrame int, id raft.ServerID, kind uint8) (frame, error) {
	buf, err := readFrame(br, maxFrame)
	if err != nil {
		return frame{}, fmt.Errorf("install snapshot to %s: read response: %w", id, err)
	}
	f, err := decodeFrame(buf)
	if err != nil {
		return frame{}, fmt.Errorf("install snapshot to %s: %w", id, err)
	}
	if we, ok := f.msg.(*wireError); ok {
		return frame{}, fmt.Errorf("install snapshot: %w", we.toError(string(id)))
	}
	if f.kind != kind {
		return frame{}, fmt.Errorf("install snapshot to %s: unexpected response kind %#x", id, f.kind)
	}
	return f, nil
}

// push queues a request for serveInbox; false if the group is closed or its
// inbox is full. It never blocks.
func (g *GroupTransport) push(in inbound) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false
	}
	select {
	case g.inbox <- in:
		return true
	default:
		return false
	}
}

// serveInbox hands queued requests to the group's Raft one at a time, in
// arrival order (which keeps pipelined appends in order), and queues each
// response on the connection the request came from.
func (g *GroupTransport) serveInbox() {
	timeout := g.node.cfg.AppendTimeout
	timer := time.NewTimer(timeout)
	timer.Stop()
	for {
		select {
		case in := <-g.inbox:
			g.serve(in, timer, timeout)
		case <-g.done:
			// push cannot add more once closed is set (before done).
			for {
				select {
				case in := <-g.inbox:
					in.c.replyError(in.f.reqID, in.f.group, codeUnknownGroup, "unknown group")
				default:
					return
				}
			}
		}
	}
}

func (g *GroupTransport) serve(in inbound, timer *time.Timer, timeout time.Duration) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: in.f.msg, RespChan: respCh}
	timer.Reset(timeout)
	defer timer.Stop()
	select {
	case g.consume <- rpc:
	case <-g.done:
		in.c.replyError(in.f.reqID, in.f.group, codeUnknownGroup, "unknown group")
		return
	case <-timer.C:
		in.c.replyError(in.f.reqID, in.f.group, codeTimeout, "timeout")
		return
	}
	select {
	case r := <-respCh:
		g.respond(in.c, in.f, r)
		g.noteVote(in.f, r)
	case <-g.done:
		in.c.replyError(in.f.reqID, in.f.group, codeUnknownGroup, "unknown group")
	case <-timer.C:
		in.c.replyError(in.f.reqID, in.f.group, codeTimeout, "timeout")
	}
}

func (g *GroupTransport) respond(c *conn, f frame, r raft.RPCResponse) {
	if r.Error != nil {
		c.replyError(f.reqID, f.group, codeGeneric, r.Error.Error())
		return
	}
	if r.Response == nil {
		c.replyError(f.reqID, f.group, codeGeneric, "no response")
		return
	}
	c.reply(f.kind|kindResponse, f.reqID, f.group, r.Response, isIdleTraffic(f.kind, f.msg))
}

// heartbeat runs the heartbeat fast path on the connection's read
// goroutine. hashicorp/raft's handler answers synchronously, or not at all
// when it is shutting down.
func (g *GroupTransport) heartbeat(c *conn, f frame, fn func(raft.RPC)) {
	respCh := make(chan raft.RPCResponse, 1)
	fn(raft.RPC{Command: f.msg, RespChan: respCh})
	select {
	case r := <-respCh:
		g.respond(c, f, r)
	default:
		c.replyError(f.reqID, f.group, codeGeneric, "heartbeat not handled")
	}
}

// AppendEntriesPipeline implements raft.Transport: up to
// Config.PipelineWindow appends in flight to one peer, on the group's append
// lane, with responses delivered in send order.
func (g *GroupTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	w := g.node.cfg.PipelineWindow
	if w < 0 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	if g.isClosed() {
		return nil, fmt.Errorf("append pipeline to %s: %w", id, ErrClosed)
	}
	if g.behind(id) {
		return nil, raft.ErrPipelineReplicationNotSupported // not yet: see behind
	}
	p := &pipeline{
		g: g, id: id, lane: g.node.peer(target).appends[g.lane],
		slots:    make(chan struct{}, w),
		inflight: make(chan *appendFuture, w),
		results:  make(chan raft.AppendFuture, w),
		stop:     make(chan struct{}),
	}
	p.wg.Add(1)
	if !g.node.spawn(func() {
		defer p.wg.Done()
		p.run()
	}) {
		return nil, fmt.Errorf("append pipeline to %s: %w", id, ErrClosed)
	}
	return p, nil
}

type pipeline struct {
	g        *GroupTransport
	id       raft.ServerID
	lane     *lane
	slots    chan struct{} // one token per append in flight
	inflight chan *appendFuture
	results  chan raft.AppendFuture
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup // run
}

type appendFuture struct {
	start time.Time
	end   uint64 // the group's last log index when sent; see PeerOutOfSync
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	done  chan struct{}
	err   error

	c        *conn
	reqID    uint64
	cl       *call
	quiesced bool // answered by quiesce, never sent
}

func (f *appendFuture) Error() error                          { <-f.done; return f.err }
func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// AppendEntries implements raft.AppendPipeline. It blocks while the window
// is full, until a response arrives or the pipeline or group closes.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	select {
	case <-p.stop: // checked first: a select picks among ready cases at random
		return nil, raft.ErrPipelineShutdown
	default:
	}
	select {
	case p.slots <- struct{}{}:
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	case <-p.g.done:
		return nil, raft.ErrPipelineShutdown
	}
	if len(args.Entries) == 0 && p.g.quiesce(p.id, args, resp) {
		f := &appendFuture{start: time.Now(), req: args, resp: resp, done: make(chan struct{}), quiesced: true}
		p.inflight <- f // never blocks: slots bound it
		return f, nil
	}
	start, end := time.Now(), p.g.logEnd()
	p.g.topUp(args) // progress.go
	p.g.node.stats.sent[kindAppendEntries].Add(1)
	c, reqID, cl, err := p.g.send(p.id, p.lane, kindAppendEntries, args)
	if err != nil {
		<-p.slots
		return nil, err
	}
	f := &appendFuture{start: start, end: end, req: args, resp: resp, done: make(chan struct{}), c: c, reqID: reqID, cl: cl}
	p.inflight <- f // never blocks: slots bound it
	return f, nil
}

// run completes futures in send order and hands them to Consumer.
func (p *pipeline) run() {
	timeout := p.g.node.cfg.AppendTimeout
	for {
		var f *appendFuture
		select {
		case f = <-p.inflight:
		case <-p.stop:
			p.drain()
			return
		case <-p.g.done:
			p.drain()
			return
		}
		var msg any
		var err error
		if !f.quiesced { // a quiesced future holds its answer already
			msg, err = p.g.wait(f.c, f.reqID, f.cl, kindAppendEntries, timeout, p.stop)
		}
		if err == nil && !f.quiesced {
			*f.resp = *msg.(*raft.AppendEntriesResponse)
			p.g.noteProgress(p.id, f.req, f.resp, f.start, f.end)
		}
		f.err = err
		close(f.done)
		if errors.Is(err, raft.ErrPipelineShutdown) {
			p.drain()
			return
		}
		select {
		case p.results <- f:
		case <-p.stop:
			p.drain()
			return
		case <-p.g.done:
			p.drain()
			return
		}
		<-p.slots
	}
}

// drain fails the futures still in flight after Close.
func (p *pipeline) drain() {
	for {
		select {
		case f := <-p.inflight:
			if !f.quiesced {
				f.c.forget(f.reqID)
			}
			f.err = raft.ErrPipelineShutdown
			close(f.done)
		default:
			return
		}
	}
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.results }

// Close implements raft.AppendPipeline: it stops the pipeline, fails the
// appends in flight and waits for its goroutine.
func (p *pipeline) Close() error {
	p.once.Do(func() {
		close(p.stop)
		p.wg.Wait()
	})
	return nil
}
