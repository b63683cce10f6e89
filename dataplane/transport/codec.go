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
//	...   payload of the kind (see the encode* functions)
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
	if len(group) > maxGroupIDLen {
		return nil, 0, fmt.Errorf("encode frame: group id of %d bytes exceeds %d", len(group), maxGroupIDLen)
	}
	est := 64 + len(group)
	if ae, ok := msg.(*raft.AppendEntriesRequest); ok {
		est += len(ae.ID) + len(ae.Addr) + len(ae.Leader) + 48*len(ae.Entries)
	}
	b := make([]byte, frameHeaderLen, est)
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint64(b, reqID)
	b = appendBytes(b, []byte(group))

	var bufs net.Buffers
	switch m := msg.(type) {
	case *raft.AppendEntriesRequest:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = appendBytes(b, m.Leader)
		b = binary.AppendUvarint(b, m.PrevLogEntry)
		b = binary.AppendUvarint(b, m.PrevLogTerm)
		b = binary.AppendUvarint(b, m.LeaderCommitIndex)
		b = binary.AppendUvarint(b, uint64(len(m.Entries)))
		for _, e := range m.Entries {
			b = binary.AppendUvarint(b, e.Index)
			b = binary.AppendUvarint(b, e.Term)
			b = append(b, uint8(e.Type))
			b = appendTime(b, e.AppendedAt)
			b = appendBytes(b, e.Extensions)
			b = binary.AppendUvarint(b, uint64(len(e.Data)))
			if len(e.Data) <= inlineDataMax {
				b = append(b, e.Data...)
				continue
			}
			bufs = append(bufs, b, e.Data)
			// Keep appending into the unused tail of the same array: the
			// slice already queued does not see bytes past its length.
			b = b[len(b):]
		}
	case *raft.AppendEntriesResponse:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = binary.AppendUvarint(b, m.LastLog)
		b = appendBool(b, m.Success)
		b = appendBool(b, m.NoRetryBackoff)
	case *raft.RequestVoteRequest:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = appendBytes(b, m.Candidate)
		b = binary.AppendUvarint(b, m.LastLogIndex)
		b = binary.AppendUvarint(b, m.LastLogTerm)
		b = appendBool(b, m.LeadershipTransfer)
	case *raft.RequestVoteResponse:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = appendBytes(b, m.Peers)
		b = appendBool(b, m.Granted)
	case *raft.RequestPreVoteRequest:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = binary.AppendUvarint(b, m.LastLogIndex)
		b = binary.AppendUvarint(b, m.LastLogTerm)
	case *raft.RequestPreVoteResponse:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = appendBool(b, m.Granted)
	case *raft.TimeoutNowRequest:
		b = appendHeader(b, m.RPCHeader)
	case *raft.TimeoutNowResponse:
		b = appendHeader(b, m.RPCHeader)
	case *raft.InstallSnapshotRequest:
		if m.Size < 0 {
			return nil, 0, fmt.Errorf("encode frame: negative snapshot size %d", m.Size)
		}
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendVarint(b, int64(m.SnapshotVersion))
		b = binary.AppendUvarint(b, m.Term)
		b = appendBytes(b, m.Leader)
		b = binary.AppendUvarint(b, m.LastLogIndex)
		b = binary.AppendUvarint(b, m.LastLogTerm)
		b = appendBytes(b, m.Peers)
		b = appendBytes(b, m.Configuration)
		b = binary.AppendUvarint(b, m.ConfigurationIndex)
		b = binary.AppendUvarint(b, uint64(m.Size))
	case *raft.InstallSnapshotResponse:
		b = appendHeader(b, m.RPCHeader)
		b = binary.AppendUvarint(b, m.Term)
		b = appendBool(b, m.Success)
	case nil:
		if kind != kindSnapshotAccept && kind != kindPing && kind != kindPing|kindResponse {
			return nil, 0, errors.New("encode frame: nil message")
		}
	case *wireError:
		b = append(b, m.code)
		b = appendBytes(b, []byte(m.msg))
	default:
		return nil, 0, fmt.Errorf("encode frame: unsupported message %T", msg)
	}
	if len(b) > 0 || len(bufs) == 0 {
		bufs = append(bufs, b)
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

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendTime encodes t as Unix nanoseconds, 0 for the zero time. (The
// instant 1970-01-01T00:00:00Z therefore decodes as the zero time.)
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(b, 0)
	}
	return binary.AppendVarint(b, t.UnixNano())
}

func appendHeader(b []byte, h raft.RPCHeader) []byte {
	b = binary.AppendVarint(b, int64(h.ProtocolVersion))
	b = appendBytes(b, h.ID)
	return appendBytes(b, h.Addr)
}

// decodeFrame decodes the bytes of one frame after its length prefix. Byte
// slices in the result (group id, header ids, entry data and extensions)
// alias buf, so the caller must not reuse buf. Allocations: the message
// struct, one []raft.Log and one []*raft.Log per AppendEntries frame (none
// per entry), and the error string of a kindError frame.
func decodeFrame(buf []byte) (frame, error) {
	d := decoder{b: buf}
	var f frame
	f.kind = d.u8()
	f.reqID = d.u64()
	f.group = d.bytes()
	if len(f.group) > maxGroupIDLen {
		return frame{}, fmt.Errorf("decode frame: group id of %d bytes exceeds %d", len(f.group), maxGroupIDLen)
	}
	if d.err != nil {
		return frame{}, fmt.Errorf("decode frame header: %w", d.err)
	}
	switch f.kind {
	case kindAppendEntries:
		m := &raft.AppendEntriesRequest{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.Leader = d.bytes()
		m.PrevLogEntry = d.uv()
		m.PrevLogTerm = d.uv()
		m.LeaderCommitIndex = d.uv()
		n := d.uv()
		if d.err == nil && (n > maxEntriesPerFrame || n > uint64(len(d.b))/minEntryLen) {
			return frame{}, fmt.Errorf("decode append entries: %d entries in %d bytes", n, len(d.b))
		}
		if n > 0 && d.err == nil {
			logs := make([]raft.Log, n)
			m.Entries = make([]*raft.Log, n)
			for i := range logs {
				e := &logs[i]
				e.Index = d.uv()
				e.Term = d.uv()
				e.Type = raft.LogType(d.u8())
				e.AppendedAt = d.time()
				e.Extensions = d.bytes()
				e.Data = d.bytes()
				m.Entries[i] = e
			}
		}
		f.msg = m
	case kindAppendEntries | kindResponse:
		m := &raft.AppendEntriesResponse{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.LastLog = d.uv()
		m.Success = d.bool()
		m.NoRetryBackoff = d.bool()
		f.msg = m
	case kindRequestVote:
		m := &raft.RequestVoteRequest{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.Candidate = d.bytes()
		m.LastLogIndex = d.uv()
		m.LastLogTerm = d.uv()
		m.LeadershipTransfer = d.bool()
		f.msg = m
	case kindRequestVote | kindResponse:
		m := &raft.RequestVoteResponse{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.Peers = d.bytes()
		m.Granted = d.bool()
		f.msg = m
	case kindRequestPreVote:
		m := &raft.RequestPreVoteRequest{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.LastLogIndex = d.uv()
		m.LastLogTerm = d.uv()
		f.msg = m
	case kindRequestPreVote | kindResponse:
		m := &raft.RequestPreVoteResponse{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.Granted = d.bool()
		f.msg = m
	case kindTimeoutNow:
		f.msg = &raft.TimeoutNowRequest{RPCHeader: d.header()}
	case kindTimeoutNow | kindResponse:
		f.msg = &raft.TimeoutNowResponse{RPCHeader: d.header()}
	case kindInstallSnapshot:
		m := &raft.InstallSnapshotRequest{}
		m.RPCHeader = d.header()
		m.SnapshotVersion = raft.SnapshotVersion(d.int())
		m.Term = d.uv()
		m.Leader = d.bytes()
		m.LastLogIndex = d.uv()
		m.LastLogTerm = d.uv()
		m.Peers = d.bytes()
		m.Configuration = d.bytes()
		m.ConfigurationIndex = d.uv()
		size := d.uv()
		if size > math.MaxInt64 {
			return frame{}, fmt.Errorf("decode install snapshot: size %d out of range", size)
		}
		m.Size = int64(size)
		f.msg = m
	case kindInstallSnapshot | kindResponse:
		m := &raft.InstallSnapshotResponse{}
		m.RPCHeader = d.header()
		m.Term = d.uv()
		m.Success = d.bool()
		f.msg = m
	case kindSnapshotAccept, kindPing, kindPing | kindResponse:
	case kindError:
		code := d.u8()
		f.msg = &wireError{code: code, msg: string(d.bytes())}
	default:
		return frame{}, fmt.Errorf("decode frame: unknown kind %#x", f.kind)
	}
	if d.err != nil {
		return frame{}, fmt.Errorf("decode frame kind %#x: %w", f.kind, d.err)
	}
	if len(d.b) != 0 {
		return frame{}, fmt.Errorf("decode frame kind %#x: %d bytes left: %w", f.kind, len(d.b), errTrailing)
	}
	return f, nil
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

func (d *decoder) header() raft.RPCHeader {
	var h raft.RPCHeader
	h.ProtocolVersion = raft.ProtocolVersion(d.int())
	h.ID = d.bytes()
	h.Addr = d.bytes()
	return h
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
