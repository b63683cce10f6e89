package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Segment RPCs carry a group's partition segment files to a replica being
// seeded (see dataplane/DESIGN.md, "Seeding a replica from segments"). They
// are requests like Raft's own: on the append lane, admitted only from a
// peer in the group's configuration (admit), answered by the group's
// SegmentSource on a goroutine of their own so disk reads never hold up
// the connection's read loop.

// maxSegmentRead bounds the bytes one SegmentRead answers.
const maxSegmentRead = 4 << 20

// ErrSeeding is returned (wrapped) by an AppendEntries or TimeoutNow sent to
// a replica that is being seeded, and by this replica's own vote requests
// while it is: it takes no entries and no leadership until its copy is in.
var ErrSeeding = errors.New("raft group replica is being seeded")

// ErrNoSegmentSource is returned (wrapped) by a segment RPC to a group that
// serves none.
var ErrNoSegmentSource = errors.New("raft group serves no segments")

// SegmentInfo is one segment file to copy: its base offset and how many of
// its bytes.
type SegmentInfo struct {
	Base, Size int64
}

// SegmentSource serves a group's segment files to peers (the partition
// log's SeedSegments and ReadSegment).
type SegmentSource interface {
	// SeedSegments lists the files holding offsets [from, to) and the
	// offset the copy starts at (from, or the log start if later).
	SeedSegments(from, to int64) (start int64, segs []SegmentInfo, err error)
	// ReadSegment reads segment base's bytes from pos, never past limit.
	ReadSegment(base, pos, limit int64, p []byte) (int, error)
}

// SegmentListRequest asks which segment files hold offsets [From, To).
type SegmentListRequest struct {
	raft.RPCHeader
	From, To int64
}

// SegmentListResponse answers a SegmentListRequest.
type SegmentListResponse struct {
	raft.RPCHeader
	Start    int64
	Segments []SegmentInfo
}

// SegmentReadRequest asks for up to Max bytes of segment Base from byte
// Pos, not past Limit.
type SegmentReadRequest struct {
	raft.RPCHeader
	Base, Pos, Limit int64
	Max              uint64
}

// SegmentReadResponse carries the bytes read.
type SegmentReadResponse struct {
	raft.RPCHeader
	Data []byte
}

// GetRPCHeader implements raft.WithRPCHeader (admit checks the sender).
func (r *SegmentListRequest) GetRPCHeader() raft.RPCHeader { return r.RPCHeader }

// GetRPCHeader implements raft.WithRPCHeader.
func (r *SegmentReadRequest) GetRPCHeader() raft.RPCHeader { return r.RPCHeader }

// SetSegmentSource makes the group serve its segment files to seeding
// peers. Without one, segment RPCs are answered ErrNoSegmentSource.
func (g *GroupTransport) SetSegmentSource(src SegmentSource) {
	g.segments.Store(&src)
}

// SetSeeding marks this group's replica as being seeded (on) or not: while
// it is, AppendEntries other than heartbeats and TimeoutNow from peers are
// answered ErrSeeding (the leader keeps its next index for this replica
// and retries after its backoff, instead of walking it back), and this
// replica's vote requests fail without being sent, so it never wins an
// election it could not serve.
func (g *GroupTransport) SetSeeding(on bool) { g.seeding.Store(on) }

// Seeding reports SetSeeding's state.
func (g *GroupTransport) Seeding() bool { return g.seeding.Load() }

// refuseWhileSeeding reports whether request f must be answered ErrSeeding.
func (g *GroupTransport) refuseWhileSeeding(f frame) bool {
	if !g.seeding.Load() {
		return false
	}
	switch f.kind {
	case kindTimeoutNow:
		return true
	case kindAppendEntries:
		return !isHeartbeat(f.msg.(*raft.AppendEntriesRequest))
	}
	return false
}

func (g *GroupTransport) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.node.cfg.ID), Addr: []byte(g.node.addr)}
}

// SegmentList asks peer id at target which segment files hold [from, to).
func (g *GroupTransport) SegmentList(ctx context.Context, id raft.ServerID, target raft.ServerAddress, from, to int64) (int64, []SegmentInfo, error) {
	msg, err := g.segmentCall(ctx, id, target, kindSegmentList, &SegmentListRequest{RPCHeader: g.header(), From: from, To: to})
	if err != nil {
		return 0, nil, err
	}
	r := msg.(*SegmentListResponse)
	return r.Start, r.Segments, nil
}

// SegmentRead reads up to len(p) bytes (at most 4 MiB) of peer id's segment
// base from byte pos, never past limit, into p.
func (g *GroupTransport) SegmentRead(ctx context.Context, id raft.ServerID, target raft.ServerAddress, base, pos, limit int64, p []byte) (int, error) {
	req := &SegmentReadRequest{RPCHeader: g.header(), Base: base, Pos: pos, Limit: limit, Max: uint64(min(len(p), maxSegmentRead))}
	msg, err := g.segmentCall(ctx, id, target, kindSegmentRead, req)
	if err != nil {
		return 0, err
	}
	data := msg.(*SegmentReadResponse).Data
	if uint64(len(data)) > req.Max {
		return 0, fmt.Errorf("segment read from %s: %d bytes for %d asked", id, len(data), req.Max)
	}
	return copy(p, data), nil
}

func (g *GroupTransport) segmentCall(ctx context.Context, id raft.ServerID, target raft.ServerAddress, kind uint8, args any) (any, error) {
	g.node.stats.sent[kind].Add(1)
	p := g.node.peer(target)
	c, reqID, cl, err := g.send(id, p.appends[g.lane], kind, args)
	if err != nil {
		return nil, err
	}
	timeout := g.node.cfg.AppendTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(0, time.Until(d)))
	}
	msg, err := g.wait(c, reqID, cl, kind, timeout, ctx.Done())
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("segment rpc to %s: %w", id, ctx.Err())
	}
	return msg, err
}

// serveSegments answers a segment RPC from the group's source, on its own
// goroutine (a disk read must not block the connection's read loop).
func (n *Node) serveSegments(c *conn, f frame, g *GroupTransport) {
	src := g.segments.Load()
	if src == nil {
		c.replyError(f.reqID, f.group, codeNoSource, "no segment source")
		return
	}
	if !n.spawn(func() {
		var resp any
		var err error
		switch req := f.msg.(type) {
		case *SegmentListRequest:
			var r SegmentListResponse
			r.Start, r.Segments, err = (*src).SeedSegments(req.From, req.To)
			resp = &r
		case *SegmentReadRequest:
			buf := make([]byte, min(req.Max, maxSegmentRead))
			var k int
			k, err = (*src).ReadSegment(req.Base, req.Pos, req.Limit, buf)
			resp = &SegmentReadResponse{Data: buf[:k]}
		}
		if err != nil {
			c.replyError(f.reqID, f.group, codeGeneric, err.Error())
			return
		}
		c.reply(f.kind|kindResponse, f.reqID, f.group, resp, false)
	}) {
		c.replyError(f.reqID, f.group, codeUnknownGroup, "unknown group")
	}
}
