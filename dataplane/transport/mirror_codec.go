package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// Frames of the mirror read RPCs (mirror.go). They share the frame layout
// of codec.go (length, kind, request id, group id, payload) but are
// encoded and decoded here: a mirror connection decodes nothing else, so
// no Raft or segment payload from another cell ever reaches that
// decoder. Payloads:
//
//	MirrorReadRequest      uv offset, uv max bytes
//	MirrorReadResponse     bytes raw batches
//	MirrorStateRequest     (none)
//	MirrorStateResponse    uv log start, uv high watermark, u8 fenced, uv fenced end
//	MirrorSnapshotRequest  (none)
//	MirrorSnapshotResponse bytes the encoded mirror start (raftlog.EncodeMirrorStart)
//	kindError              as in codec.go
const (
	kindMirrorRead     uint8 = 9
	kindMirrorState    uint8 = 10
	kindMirrorSnapshot uint8 = 11
)

// Error codes of mirror answers (kindError frames).
const (
	codeNotLeader   uint8 = 8  // the group's replica here does not lead; msg is the leader's server id, if known
	codeNotGranted  uint8 = 9  // the calling cell has no grant for the group's topic
	codeMirrorOnly  uint8 = 10 // a mirror connection carries only mirror read RPCs
	codeOutOfRange  uint8 = 11 // the offset is below the log start
	codeMirrorError uint8 = 12 // the source failed; the cause stays in its log
)

// MirrorReadRequest asks for raw batches from Offset, at most Max bytes
// (a larger first batch is still sent whole).
type MirrorReadRequest struct {
	Offset int64
	Max    uint64
}

// MirrorReadResponse carries the batches read.
type MirrorReadResponse struct{ Data []byte }

// MirrorStateRequest asks for the partition's MirrorState.
type MirrorStateRequest struct{}

// MirrorStateResponse answers a MirrorStateRequest.
type MirrorStateResponse struct{ MirrorState }

// MirrorSnapshotRequest asks for the partition's mirror start.
type MirrorSnapshotRequest struct{}

// MirrorSnapshotResponse carries the encoded mirror start.
type MirrorSnapshotResponse struct{ Data []byte }

// MirrorState is a source partition's log start, high watermark and
// fence (FencedEnd is 0 unless Fenced).
type MirrorState struct {
	LogStart, HighWatermark int64
	Fenced                  bool
	FencedEnd               int64
}

func newMirrorMessage(kind uint8) any {
	switch kind {
	case kindMirrorRead:
		return &MirrorReadRequest{}
	case kindMirrorRead | kindResponse:
		return &MirrorReadResponse{}
	case kindMirrorState:
		return &MirrorStateRequest{}
	case kindMirrorState | kindResponse:
		return &MirrorStateResponse{}
	case kindMirrorSnapshot:
		return &MirrorSnapshotRequest{}
	case kindMirrorSnapshot | kindResponse:
		return &MirrorSnapshotResponse{}
	case kindError:
		return &wireError{}
	}
	return nil
}

// mirrorPayload is payload (codec.go) for the mirror messages.
func (c *fieldCodec) mirrorPayload(msg any) bool {
	switch m := msg.(type) {
	case *MirrorReadRequest:
		c.offset(&m.Offset)
		c.uv(&m.Max)
	case *MirrorReadResponse:
		c.bytes(&m.Data)
	case *MirrorStateRequest, *MirrorSnapshotRequest:
	case *MirrorStateResponse:
		c.offset(&m.LogStart)
		c.offset(&m.HighWatermark)
		c.bool(&m.Fenced)
		c.offset(&m.FencedEnd)
	case *MirrorSnapshotResponse:
		c.bytes(&m.Data)
	case *wireError:
		c.u8(&m.code)
		c.str(&m.msg)
	default:
		return false
	}
	return true
}

func isMirrorMessage(msg any) bool {
	switch msg.(type) {
	case *MirrorReadRequest, *MirrorReadResponse, *MirrorStateRequest, *MirrorStateResponse,
		*MirrorSnapshotRequest, *MirrorSnapshotResponse:
		return true
	}
	return false
}

// encodeAny encodes a frame of any kind the transport carries.
func encodeAny(kind uint8, reqID uint64, group string, msg any, maxFrame int) (net.Buffers, error) {
	if !isMirrorMessage(msg) {
		bufs, _, err := encodeFrame(kind, reqID, group, msg, maxFrame)
		return bufs, err
	}
	return encodeMirrorFrame(kind, reqID, group, msg, maxFrame)
}

// encodeMirrorFrame encodes one mirror frame into one buffer.
func encodeMirrorFrame(kind uint8, reqID uint64, group string, msg any, maxFrame int) (net.Buffers, error) {
	extra := 0
	switch m := msg.(type) {
	case *MirrorReadResponse:
		extra = len(m.Data)
	case *MirrorSnapshotResponse:
		extra = len(m.Data)
	}
	b, err := startFrame("mirror frame", kind, reqID, group, extra)
	if err != nil {
		return nil, err
	}
	c := fieldCodec{encoding: true, b: b}
	if !c.mirrorPayload(msg) {
		return nil, fmt.Errorf("encode mirror frame: unsupported message %T", msg)
	}
	if len(c.b)-frameHeaderLen > maxFrame {
		return nil, fmt.Errorf("encode mirror frame of %d bytes (limit %d): %w", len(c.b), maxFrame, errFrameTooLarge)
	}
	binary.LittleEndian.PutUint32(c.b[:frameHeaderLen], uint32(len(c.b)-frameHeaderLen))
	return net.Buffers{c.b}, nil
}

// errNotMirrorKind marks a frame decoded on a mirror connection whose kind
// is not a mirror message: its payload is left undecoded.
var errNotMirrorKind = errors.New("not a mirror rpc")

// decodeMirrorFrame decodes the bytes of one frame after its length
// prefix, as read on a mirror connection. A request of another kind (a
// Raft or segment RPC) comes back with its header only and msg nil, so
// the server can refuse it by name; its payload is never parsed. Byte
// slices in the result alias buf.
func decodeMirrorFrame(buf []byte) (frame, error) {
	c := fieldCodec{d: decoder{b: buf}}
	f, err := c.frameHeader("mirror frame")
	if err != nil {
		return frame{}, err
	}
	f.msg = newMirrorMessage(f.kind)
	if f.msg == nil {
		if f.kind&kindResponse != 0 || f.kind == kindSnapshotAccept {
			return frame{}, fmt.Errorf("decode mirror frame: unknown kind %#x", f.kind)
		}
		return f, errNotMirrorKind
	}
	c.mirrorPayload(f.msg)
	if err := c.payloadDone("mirror frame", f.kind); err != nil {
		return frame{}, err
	}
	return f, nil
}
