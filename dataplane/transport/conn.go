package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// laneKind names what a connection carries.
type laneKind uint8

const (
	// laneControl carries heartbeats, RequestVote, RequestPreVote,
	// TimeoutNow: small RPCs that must never wait behind entry data.
	laneControl laneKind = 1
	// laneAppend carries AppendEntries with entries (and every pipelined
	// AppendEntries, so one group's appends stay in order).
	laneAppend laneKind = 2
	// laneSnapshot is a short-lived connection carrying one InstallSnapshot.
	laneSnapshot laneKind = 3
	// laneMirror is a connection from another cell's broker carrying
	// only the mirror read RPCs (mirror.go).
	laneMirror laneKind = 4
)

func (k laneKind) String() string {
	switch k {
	case laneControl:
		return "control"
	case laneAppend:
		return "append"
	case laneSnapshot:
		return "snapshot"
	case laneMirror:
		return "mirror"
	}
	return fmt.Sprintf("lane(%d)", uint8(k))
}

var helloMagic = [4]byte{'S', 'L', 'R', 'T'}

// helloVersion 2: the hello is followed by a TLS handshake and sent again
// inside TLS (version 1 connections were never authenticated).
const helloVersion = 2

// writeHello writes the first bytes of every connection, in clear and again
// inside TLS: magic, version, lane kind and the dialing broker's id.
func writeHello(w io.Writer, lane laneKind, from string) error {
	b := make([]byte, 0, 16+len(from))
	b = append(b, helloMagic[:]...)
	b = append(b, helloVersion, uint8(lane))
	b = appendBytes(b, []byte(from))
	_, err := w.Write(b)
	return err
}

func readHello(r *bufio.Reader) (laneKind, string, error) {
	var h [6]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, "", fmt.Errorf("read hello: %w", err)
	}
	if [4]byte(h[:4]) != helloMagic {
		return 0, "", errors.New("read hello: bad magic")
	}
	if h[4] != helloVersion {
		return 0, "", fmt.Errorf("read hello: unsupported version %d", h[4])
	}
	lane := laneKind(h[5])
	if lane < laneControl || lane > laneMirror {
		return 0, "", fmt.Errorf("read hello: unknown lane %d", lane)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, "", fmt.Errorf("read hello: %w", err)
	}
	if n > maxGroupIDLen {
		return 0, "", fmt.Errorf("read hello: broker id of %d bytes", n)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(r, id); err != nil {
		return 0, "", fmt.Errorf("read hello: %w", err)
	}
	return lane, string(id), nil
}

// result is the outcome of one request, delivered to its call.
type result struct {
	msg any
	err error
	// incarnation is the answering Node's, for a ping (liveness.go).
	incarnation string
}

// call is one request waiting for its response on a client connection.
type call struct {
	ch chan result // capacity 1: the reader never blocks on it
}

// conn is one TCP connection of a lane, either dialed (client: it sends
// requests and reads responses) or accepted (server: it reads requests and
// sends responses). It owns two goroutines, readLoop and writeLoop (which
// writes only when callers hand it a backlog, see enqueue), both
// tracked by the Node's WaitGroup and ended by close.
type conn struct {
	node   *Node
	nc     net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer // used by the writer of the moment (see writing)
	lane   laneKind
	peer   string // the remote broker id
	client bool
	mirror *mirrorConn // set on the mirror lane: frames are mirror frames

	wake   chan struct{} // capacity 1: frames are queued
	linger *time.Timer   // flushes lazy frames; read by writeLoop
	// alive checks that a silent peer is still there (silence.go); read
	// by writeLoop. Client connections only: nil on accepted ones.
	alive  *time.Timer
	window int64         // nanos: the liveness window (silence.go); client only
	done   chan struct{} // closed by close
	once   sync.Once
	nextID atomic.Uint64

	// mu guards the fields below.
	mu        sync.Mutex
	closed    bool
	err       error
	writing   bool        // a goroutine is writing; others queue
	lingering bool        // linger is armed for queued lazy frames
	handoff   bool        // a caller left writing set for writeLoop to take over
	queue     net.Buffers // frames waiting to be written
	spare     net.Buffers
	pending   map[uint64]*call // client only
	silence   silence          // client only (silence.go)
}

func newConn(n *Node, nc net.Conn, br *bufio.Reader, lane laneKind, peer string, client bool) *conn {
	c := &conn{
		node: n, nc: nc, br: br, lane: lane, peer: peer, client: client,
		bw:     bufio.NewWriterSize(nc, 32<<10),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		linger: time.NewTimer(time.Hour),
	}
	c.linger.Stop()
	if client {
		c.pending = map[uint64]*call{}
		c.window = int64(n.laneWindow(lane))
		c.alive = time.NewTimer(time.Hour)
		c.alive.Stop()
	}
	return c
}

// start launches the connection's goroutines; false if the node is closed.
func (c *conn) start() bool {
	n := c.node
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	n.spawnLocked(c.writeLoop)
	n.spawnLocked(c.readLoop)
	return true
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close shuts the connection and fails every pending call with err.
func (c *conn) close(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.err = err
		pending := c.pending
		c.pending = nil
		c.queue = nil
		c.mu.Unlock()
		close(c.done)
		_ = c.nc.Close()
		for _, cl := range pending {
			cl.ch <- result{err: fmt.Errorf("%s connection to %s closed: %w", c.lane, c.peer, err)}
		}
		c.node.untrack(c)
	})
}

// enqueue sends one encoded frame. A lazy frame (idle traffic: heartbeats,
// empty appends and their responses) may wait up to Config.Linger so that
// frames of many groups share one write and one read; any other frame is
// written at once, with whatever lazy frames are queued. When no write is in progress the
// calling goroutine writes at once (with whatever else is queued), which
// saves a goroutine hand-off per message on idle connections; otherwise the
// frame is queued and the writer in progress, or writeLoop, sends it. A
// caller never writes more than one batch: if more frames queued up during
// its write, it hands them to writeLoop.
func (c *conn) enqueue(frame net.Buffers, lazy bool) error {
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s connection to %s: %w", c.lane, c.peer, err)
	}
	c.queue = append(c.queue, frame...)
	if c.writing {
		c.mu.Unlock()
		return nil
	}
	if lazy {
		// Wait up to Config.Linger for more frames to share the write.
		if !c.lingering {
			c.lingering = true
			c.linger.Reset(c.node.cfg.Linger)
		}
		c.mu.Unlock()
		return nil
	}
	c.writing = true
	more, err := c.writeBatch() // unlocks and relocks c.mu
	if err == nil && more {
		c.handoff = true // writing stays set: writeLoop now owns it
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		return nil
	}
	c.writing = false
	c.mu.Unlock()
	if err != nil {
		c.close(err)
		return fmt.Errorf("%s connection to %s: %w", c.lane, c.peer, err)
	}
	return nil
}

// writeBatch writes everything queued with one writev. It is called with
// c.mu held and c.writing set by the caller, releases c.mu during the
// write, and returns with c.mu held, reporting whether more frames queued
// up meanwhile.
func (c *conn) writeBatch() (more bool, err error) {
	bufs := c.queue
	c.queue = c.spare[:0]
	c.spare = nil
	c.mu.Unlock()
	keep := bufs
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.node.cfg.WriteTimeout))
	// One TLS record per frame piece would cost a record header, a MAC
	// and a system call each: pieces go through bw, so small frames share
	// records and large entry data is written straight through.
	for _, b := range bufs {
		if _, err = c.bw.Write(b); err != nil {
			break
		}
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err == nil {
		c.node.stats.laneBytes[c.lane].Add(uint64(n))
	}
	clear(keep)
	c.mu.Lock()
	if c.spare == nil && cap(keep) <= 1024 {
		c.spare = keep[:0]
	}
	if err != nil {
		return false, fmt.Errorf("write: %w", err)
	}
	return len(c.queue) > 0, nil
}

// writeLoop takes over writing when a caller handed it queued frames, and
// flushes lazy frames when their linger ends.
func (c *conn) writeLoop() {
	defer c.linger.Stop()
	var alive <-chan time.Time // nil on a server connection: never ready
	if c.alive != nil {
		defer c.alive.Stop()
		alive = c.alive.C
	}
	for {
		select {
		case <-c.wake:
		case <-c.linger.C:
		case <-alive:
			c.checkAlive(time.Now().UnixNano())
			continue
		case <-c.done:
			return
		}
		c.mu.Lock()
		c.lingering = false
		if c.handoff {
			c.handoff = false // a caller handed its writing over to us
		} else if c.writing {
			c.mu.Unlock()
			continue // the writer in progress takes the queue
		} else {
			c.writing = true
		}
		for {
			if c.closed || len(c.queue) == 0 {
				c.writing = false
				c.mu.Unlock()
				break
			}
			more, err := c.writeBatch()
			if err != nil {
				c.writing = false
				c.mu.Unlock()
				c.close(err)
				return
			}
			if !more {
				c.writing = false
				c.mu.Unlock()
				break
			}
		}
	}
}

func (c *conn) readLoop() {
	maxFrame := c.node.cfg.MaxFrameSize
	for {
		buf, err := readFrame(c.br, maxFrame)
		if err != nil {
			c.close(fmt.Errorf("read: %w", err))
			return
		}
		var f frame
		if c.mirror != nil {
			f, err = decodeMirrorFrame(buf)
			if errors.Is(err, errNotMirrorKind) && !c.client {
				err = nil // refused by name in handleMirror
			}
		} else {
			f, err = decodeFrame(buf)
		}
		if err != nil {
			c.close(err)
			return
		}
		if c.client {
			c.deliver(f)
		} else {
			c.node.handleRequest(c, f)
		}
	}
}

// deliver hands a response to the call waiting for it, if any is left. A
// late answer to a call that timed out is dropped here, by its request id;
// it still shows the peer alive (heard).
func (c *conn) deliver(f frame) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	cl := c.pending[f.reqID]
	delete(c.pending, f.reqID)
	c.heard(now)
	c.mu.Unlock()
	if cl == nil {
		return // the caller gave up
	}
	if we, ok := f.msg.(*wireError); ok {
		cl.ch <- result{err: we.toError(c.peer)}
		return
	}
	if f.kind == kindPing|kindResponse {
		// Copied: the frame's slices alias the read buffer.
		cl.ch <- result{incarnation: string(f.group)}
		return
	}
	cl.ch <- result{msg: f.msg}
}

// send registers a call and queues its request frame.
func (c *conn) send(kind uint8, group string, msg any) (uint64, *call, error) {
	id := c.nextID.Add(1)
	bufs, err := encodeAny(kind, id, group, msg, c.node.cfg.MaxFrameSize)
	if err != nil {
		return 0, nil, err
	}
	cl := &call{ch: make(chan result, 1)}
	now := time.Now().UnixNano()
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return 0, nil, fmt.Errorf("%s connection to %s: %w", c.lane, c.peer, err)
	}
	c.pending[id] = cl
	c.owe(now)
	c.mu.Unlock()
	if err := c.enqueue(bufs, c.node.cfg.Linger > 0 && isIdleTraffic(kind, msg)); err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, cl, nil
}

// forget drops a call whose caller gave up.
func (c *conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// timedOut drops a call that got no response in time. It fails that call
// alone: the connection, which every group's calls to the peer share,
// stays open, and its answer, if it comes, is dropped by its request id.
// Whether the peer is gone is the liveness window's to decide
// (silence.go), from everything the connection reads, not from one call.
func (c *conn) timedOut(id uint64) {
	c.node.stats.timedOut.Add(1)
	c.forget(id)
}

// reply queues a response (or error) frame on a server connection.
func (c *conn) reply(kind uint8, reqID uint64, group []byte, msg any, lazy bool) {
	bufs, err := encodeAny(kind, reqID, string(group), msg, c.node.cfg.MaxFrameSize)
	if err != nil {
		c.node.log.Warn("encode raft response", "lane", c.lane.String(), "error", err)
		return
	}
	_ = c.enqueue(bufs, lazy && c.node.cfg.Linger > 0) // a closed connection drops the response
}

func (c *conn) replyError(reqID uint64, group []byte, code uint8, msg string) {
	c.reply(kindError, reqID, group, &wireError{code: code, msg: msg}, false)
}

// isIdleTraffic reports whether a request is the kind an idle group sends
// all the time (a heartbeat or an AppendEntries without entries), which may
// linger to share writes.
func isIdleTraffic(kind uint8, msg any) bool {
	ae, ok := msg.(*raft.AppendEntriesRequest)
	return ok && kind == kindAppendEntries && len(ae.Entries) == 0
}
