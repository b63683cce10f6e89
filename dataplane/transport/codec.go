package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Wire format of one frame (all multi-byte fixed integers little-endian,
// "uv" = unsigned varint, "v" = signed zig-zag varint, "bytes" = uv length
// followed by that many bytes):
//
//	u32   length of everything after this field (≤ Config.MaxFrameSize)
//	u8    kind (request kind, request kind|kindResponse, or kindError)
//	u64   request id, chosen by the sender, echoed by the response
//	bytes group id (≤ maxGroupIDLen)
//	...   payload of the kind (see fieldCodec.payload)
//
// A connection starts with a hello (see writeHello) and then carries frames
// only, except a snapshot connection: the InstallSnapshot request frame, a
// kindSnapshotAccept (or kindError) frame back, then exactly Size raw bytes
// of snapshot data, then the response frame.

const (
	kindAppendEntries   uint8 = 1
	kindRequestVote     uint8 = 2
	kindRequestPreVote  uint8 = 3
	kindTimeoutNow      uint8 = 4
	kindInstallSnapshot uint8 = 5
	kindPing            uint8 = 6    // liveness probe, no group, no payload (liveness.go)
	kindSegmentList     uint8 = 7    // which segment files hold a range (segments.go)
	kindSegmentRead     uint8 = 8    // bytes of one segment file (segments.go)
	kindSnapshotAccept  uint8 = 0x7e // receiver is ready for snapshot data
	kindError           uint8 = 0x7f
	kindResponse        uint8 = 0x80 // or-ed into a request kind
)

// Error codes carried by kindError frames.
const (
	codeGeneric      uint8 = 1 // the receiving Raft returned an error
	codeUnknownGroup uint8 = 2 // no such group on the receiver
	codeBusy         uint8 = 3 // the group's inbound queue is full
	codeTimeout      uint8 = 4 // the receiving Raft did not answer in time
	codeRefused      uint8 = 5 // the sender may not send this RPC to this group
	codeSeeding      uint8 = 6 // the receiving replica is being seeded (segments.go)
	codeNoSource     uint8 = 7 // the group serves no segment files
)

const (
	frameHeaderLen = 4
	// maxGroupIDLen bounds group ids so a frame header stays small.
	maxGroupIDLen = 255
	// maxEntriesPerFrame bounds the entries slice the decoder allocates.
	// hashicorp/raft never sends more than 1024 (MaxAppendEntries' limit).
	maxEntriesPerFrame = 4096
	// minEntryLen is the smallest encoding of one entry; the decoder checks
	// the claimed entry count against the bytes left before allocating.
	minEntryLen = 6
	// inlineDataMax: entry data up to this size is copied next to its
	// header; larger data is written from the caller's slice (no copy).
	inlineDataMax = 256
	// DefaultMaxFrameSize bounds every frame read from the network: 64
	// entries of up to 1 MiB Kafka batches plus headers.
	DefaultMaxFrameSize = 80 << 20
)

var (
	errFrameTooLarge = errors.New("frame too large")
	errShortFrame    = errors.New("truncated frame")
	errTrailing      = errors.New("trailing bytes in frame")
)

// frame is one decoded frame. Byte slices in msg alias the buffer it was
// decoded from.
type frame struct {
	kind  uint8
	reqID uint64
	group []byte
	msg   any // request or response struct pointer, or *wireError
}

// wireError is the payload of a kindError frame.
type wireError struct {
	code uint8
	msg  string
}

// encodeFrame encodes one frame into a list of byte slices to be written in
// order (net.Buffers, so writev sends them without joining). Entry data
// larger than inlineDataMax is not copied: the returned buffers reference it.
// It returns the total frame size including the length prefix.
func encodeFrame(kind uint8, reqID uint64, group string, msg any, maxFrame int) (net.Buffers, int, error) {
	extra := 0
	if ae, ok := msg.(*raft.AppendEntriesRequest); ok {
		extra = len(ae.ID) + len(ae.Addr) + len(ae.Leader) + 48*len(ae.Entries)
	}
	b, err := startFrame("frame", kind, reqID, group, extra)
	if err != nil {
		return nil, 0, err
	}

	switch m := msg.(type) {
	case nil:
		if kind != kindSnapshotAccept && kind != kindPing && kind != kindPing|kindResponse {
			return nil, 0, errors.New("encode frame: nil message")
		}
	case *raft.InstallSnapshotRequest:
		if m.Size < 0 {
			return nil, 0, fmt.Errorf("encode frame: negative snapshot size %d", m.Size)
		}
	}
	c := fieldCodec{encoding: true, b: b}
	if msg != nil && !c.payload(msg) {
		return nil, 0, fmt.Errorf("encode frame: unsupported message %T", msg)
	}
	bufs := c.bufs
	if len(c.b) > 0 || len(bufs) == 0 {
		bufs = append(bufs, c.b)
	}
	total := 0
	for _, p := range bufs {
		total += len(p)
	}
	if total-frameHeaderLen > maxFrame {
		return nil, 0, fmt.Errorf("encode frame of %d bytes (limit %d): %w", total, maxFrame, errFrameTooLarge)
	}
	binary.LittleEndian.PutUint32(bufs[0][:frameHeaderLen], uint32(total-frameHeaderLen))
	return bufs, total, nil
}

// startFrame checks the group id and returns a buffer holding a frame's
// header (length placeholder, kind, request id, group id) with room for
// extra payload bytes. The Raft and the mirror encoders share it so both
// frame families keep one header layout; what names the family in errors.
func startFrame(what string, kind uint8, reqID uint64, group string, extra int) ([]byte, error) {
	if len(group) > maxGroupIDLen {
		return nil, fmt.Errorf("encode %s: group id of %d bytes exceeds %d", what, len(group), maxGroupIDLen)
	}
	b := make([]byte, frameHeaderLen, 64+len(group)+extra)
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint64(b, reqID)
	return appendBytes(b, []byte(group)), nil
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// decodeFrame decodes the bytes of one frame after its length prefix. Byte
// slices in the result (group id, header ids, entry data and extensions)
// alias buf, so the caller must not reuse buf. Allocations: the message
// struct, one []raft.Log and one []*raft.Log per AppendEntries frame (none
// per entry), and the error string of a kindError frame.
func decodeFrame(buf []byte) (frame, error) {
	c := fieldCodec{d: decoder{b: buf}}
	f, err := c.frameHeader("frame")
	if err != nil {
		return frame{}, err
	}
	if f.kind != kindSnapshotAccept && f.kind != kindPing && f.kind != kindPing|kindResponse {
		f.msg = newMessage(f.kind)
		if f.msg == nil {
			return frame{}, fmt.Errorf("decode frame: unknown kind %#x", f.kind)
		}
		c.payload(f.msg)
	}
	if err := c.payloadDone("frame", f.kind); err != nil {
		return frame{}, err
	}
	return f, nil
}

// frameHeader reads the header every frame starts with (kind, request id,
// group id). Shared by the Raft and the mirror decoders so that both check
// the header alike; what names the frame family in errors.
func (c *fieldCodec) frameHeader(what string) (frame, error) {
	d := &c.d
	var f frame
	f.kind = d.u8()
	f.reqID = d.u64()
	f.group = d.bytes()
	if d.err != nil {
		return frame{}, fmt.Errorf("decode %s header: %w", what, d.err)
	}
	if len(f.group) > maxGroupIDLen {
		return frame{}, fmt.Errorf("decode %s: group id of %d bytes exceeds %d", what, len(f.group), maxGroupIDLen)
	}
	return f, nil
}

// payloadDone reports how decoding a payload ended: a value out of range,
// a short read, or bytes left over all fail the frame.
func (c *fieldCodec) payloadDone(what string, kind uint8) error {
	switch {
	case c.bad != nil:
		return fmt.Errorf("decode %s kind %#x: %w", what, kind, c.bad)
	case c.d.err != nil:
		return fmt.Errorf("decode %s kind %#x: %w", what, kind, c.d.err)
	case len(c.d.b) != 0:
		return fmt.Errorf("decode %s kind %#x: %d bytes left: %w", what, kind, len(c.d.b), errTrailing)
	}
	return nil
}

// newMessage returns an empty message of a frame kind, nil for an unknown
// kind (and for kindSnapshotAccept, which has no payload).
func newMessage(kind uint8) any {
	switch kind {
	case kindAppendEntries:
		return &raft.AppendEntriesRequest{}
	case kindAppendEntries | kindResponse:
		return &raft.AppendEntriesResponse{}
	case kindRequestVote:
		return &raft.RequestVoteRequest{}
	case kindRequestVote | kindResponse:
		return &raft.RequestVoteResponse{}
	case kindRequestPreVote:
		return &raft.RequestPreVoteRequest{}
	case kindRequestPreVote | kindResponse:
		return &raft.RequestPreVoteResponse{}
	case kindTimeoutNow:
		return &raft.TimeoutNowRequest{}
	case kindTimeoutNow | kindResponse:
		return &raft.TimeoutNowResponse{}
	case kindInstallSnapshot:
		return &raft.InstallSnapshotRequest{}
	case kindInstallSnapshot | kindResponse:
		return &raft.InstallSnapshotResponse{}
	case kindSegmentList:
		return &SegmentListRequest{}
	case kindSegmentList | kindResponse:
		return &SegmentListResponse{}
	case kindSegmentRead:
		return &SegmentReadRequest{}
	case kindSegmentRead | kindResponse:
		return &SegmentReadResponse{}
	case kindError:
		return &wireError{}
	}
	return nil
}

// payload is the one description of each message's wire layout: in
// encoding it appends every field of msg in order, in decoding it fills
// every field from the input in the same order. It returns false for a
// message type the transport does not carry.
func (c *fieldCodec) payload(msg any) bool {
	switch m := msg.(type) {
	case *raft.AppendEntriesRequest:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.bytes(&m.Leader)
		c.uv(&m.PrevLogEntry)
		c.uv(&m.PrevLogTerm)
		c.uv(&m.LeaderCommitIndex)
		c.entries(&m.Entries)
	case *raft.AppendEntriesResponse:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.uv(&m.LastLog)
		c.bool(&m.Success)
		c.bool(&m.NoRetryBackoff)
	case *raft.RequestVoteRequest:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.bytes(&m.Candidate)
		c.uv(&m.LastLogIndex)
		c.uv(&m.LastLogTerm)
		c.bool(&m.LeadershipTransfer)
	case *raft.RequestVoteResponse:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.bytes(&m.Peers)
		c.bool(&m.Granted)
	case *raft.RequestPreVoteRequest:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.uv(&m.LastLogIndex)
		c.uv(&m.LastLogTerm)
	case *raft.RequestPreVoteResponse:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.bool(&m.Granted)
	case *raft.TimeoutNowRequest:
		c.header(&m.RPCHeader)
	case *raft.TimeoutNowResponse:
		c.header(&m.RPCHeader)
	case *raft.InstallSnapshotRequest:
		c.header(&m.RPCHeader)
		c.int((*int)(&m.SnapshotVersion))
		c.uv(&m.Term)
		c.bytes(&m.Leader)
		c.uv(&m.LastLogIndex)
		c.uv(&m.LastLogTerm)
		c.bytes(&m.Peers)
		c.bytes(&m.Configuration)
		c.uv(&m.ConfigurationIndex)
		c.size(&m.Size)
	case *raft.InstallSnapshotResponse:
		c.header(&m.RPCHeader)
		c.uv(&m.Term)
		c.bool(&m.Success)
	case *SegmentListRequest:
		c.header(&m.RPCHeader)
		c.offset(&m.From)
		c.offset(&m.To)
	case *SegmentListResponse:
		c.header(&m.RPCHeader)
		c.offset(&m.Start)
		c.segments(&m.Segments)
	case *SegmentReadRequest:
		c.header(&m.RPCHeader)
		c.offset(&m.Base)
		c.offset(&m.Pos)
		c.offset(&m.Limit)
		c.uv(&m.Max)
	case *SegmentReadResponse:
		c.header(&m.RPCHeader)
		c.bytes(&m.Data)
	case *wireError:
		c.u8(&m.code)
		c.str(&m.msg)
	default:
		return false
	}
	return true
}

// fieldCodec moves one field at a time between a message and the wire: it
// appends to b (encoding) or reads from d (decoding).
type fieldCodec struct {
	encoding bool
	b        []byte      // encoding: the frame so far
	bufs     net.Buffers // encoding: finished pieces before b
	d        decoder     // decoding
	bad      error       // decoding: a value out of range (not a short read)
}

func (c *fieldCodec) uv(p *uint64) {
	if c.encoding {
		c.b = binary.AppendUvarint(c.b, *p)
		return
	}
	*p = c.d.uv()
}

func (c *fieldCodec) u8(p *uint8) {
	if c.encoding {
		c.b = append(c.b, *p)
		return
	}
	*p = c.d.u8()
}

func (c *fieldCodec) int(p *int) {
	if c.encoding {
		c.b = binary.AppendVarint(c.b, int64(*p))
		return
	}
	*p = c.d.int()
}

func (c *fieldCodec) bool(p *bool) {
	if c.encoding {
		if *p {
			c.b = append(c.b, 1)
		} else {
			c.b = append(c.b, 0)
		}
		return
	}
	*p = c.d.bool()
}

func (c *fieldCodec) bytes(p *[]byte) {
	if c.encoding {
		c.b = appendBytes(c.b, *p)
		return
	}
	*p = c.d.bytes()
}

func (c *fieldCodec) str(p *string) {
	if c.encoding {
		c.b = binary.AppendUvarint(c.b, uint64(len(*p)))
		c.b = append(c.b, *p...)
		return
	}
	*p = string(c.d.bytes())
}

// time carries t as Unix nanoseconds, 0 for the zero time. (The instant
// 1970-01-01T00:00:00Z therefore decodes as the zero time.)
func (c *fieldCodec) time(p *time.Time) {
	if c.encoding {
		if p.IsZero() {
			c.b = binary.AppendVarint(c.b, 0)
		} else {
			c.b = binary.AppendVarint(c.b, p.UnixNano())
		}
		return
	}
	*p = c.d.time()
}

func (c *fieldCodec) header(h *raft.RPCHeader) {
	c.int((*int)(&h.ProtocolVersion))
	c.bytes(&h.ID)
	c.bytes(&h.Addr)
}

// size carries a snapshot size (never negative; encodeFrame refuses one).
func (c *fieldCodec) size(p *int64) { c.nonNegative(p, "install snapshot size") }

// offset carries a Kafka offset or file position (never negative).
func (c *fieldCodec) offset(p *int64) { c.nonNegative(p, "offset") }

// nonNegative carries an int64 that is never negative as an unsigned
// varint; decoding refuses a value past math.MaxInt64, naming it as what.
func (c *fieldCodec) nonNegative(p *int64, what string) {
	u := uint64(*p)
	c.uv(&u)
	if c.encoding || c.d.err != nil {
		return
	}
	if u > math.MaxInt64 {
		c.fail(fmt.Errorf("%s %d out of range", what, u))
		return
	}
	*p = int64(u)
}

// maxSegmentsPerList bounds the list a SegmentListResponse decodes.
const maxSegmentsPerList = 1 << 20

// segments carries a segment list: count, then base and size of each. The
// claimed count is checked against the bytes left before allocating.
func (c *fieldCodec) segments(p *[]SegmentInfo) {
	n := uint64(len(*p))
	c.uv(&n)
	if !c.encoding {
		if c.d.err != nil || n == 0 {
			return
		}
		if n > maxSegmentsPerList || n > uint64(len(c.d.b))/2 {
			c.fail(fmt.Errorf("segment list: %d segments in %d bytes", n, len(c.d.b)))
			return
		}
		*p = make([]SegmentInfo, n)
	}
	for i := range *p {
		c.offset(&(*p)[i].Base)
		c.offset(&(*p)[i].Size)
	}
}

func (c *fieldCodec) fail(err error) {
	if c.bad == nil {
		c.bad = err
	}
	c.d.b = nil
}

// entries carries an AppendEntries request's log entries. Encoding: entry
// data up to inlineDataMax is copied next to its header, larger data is
// queued from the caller's slice (no copy). Decoding: the claimed count is
// checked against the bytes left before one []raft.Log is allocated.
func (c *fieldCodec) entries(p *[]*raft.Log) {
	n := uint64(len(*p))
	c.uv(&n)
	if !c.encoding {
		if c.d.err != nil || n == 0 {
			return
		}
		if n > maxEntriesPerFrame || n > uint64(len(c.d.b))/minEntryLen {
			c.fail(fmt.Errorf("append entries: %d entries in %d bytes", n, len(c.d.b)))
			return
		}
		logs := make([]raft.Log, n)
		*p = make([]*raft.Log, n)
		for i := range logs {
			(*p)[i] = &logs[i]
		}
	}
	for _, e := range *p {
		c.uv(&e.Index)
		c.uv(&e.Term)
		t := uint8(e.Type)
		c.u8(&t)
		e.Type = raft.LogType(t)
		c.time(&e.AppendedAt)
		c.bytes(&e.Extensions)
		if !c.encoding || len(e.Data) <= inlineDataMax {
			c.bytes(&e.Data)
			continue
		}
		c.b = binary.AppendUvarint(c.b, uint64(len(e.Data)))
		c.bufs = append(c.bufs, c.b, e.Data)
		// Keep appending into the unused tail of the same array: the
		// slice already queued does not see bytes past its length.
		c.b = c.b[len(c.b):]
	}
}

// decoder reads from b; the first failure sticks in err and every later
// read returns zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errShortFrame
	}
	d.b = nil
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uv() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v, n := binary.Varint(d.b)
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		if d.err == nil {
			d.err = errors.New("bad bool")
		}
		d.b = nil
		return false
	}
}

// bytes returns a length-prefixed slice aliasing the input; nil when empty.
func (d *decoder) bytes() []byte {
	n := d.uv()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) time() time.Time {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return time.Time{}
	}
	d.b = d.b[n:]
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

// readFrame reads one length-prefixed frame into a fresh buffer (decoded
// messages alias it).
func readFrame(r *bufio.Reader, maxFrame int) ([]byte, error) {
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if uint64(n) > uint64(maxFrame) {
		return nil, fmt.Errorf("read frame of %d bytes (limit %d): %w", n, maxFrame, errFrameTooLarge)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
