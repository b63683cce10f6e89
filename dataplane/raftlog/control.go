package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ControlExtension marks a LogCommand entry as a control entry of the
// replication layer (for example "the log start offset is now X"): its
// Extensions begin with it. The store keeps a control entry in the entries
// file, as it keeps Raft's own entries, so it takes no Kafka offset; its
// Data is the replication layer's, not a record batch.
var ControlExtension = []byte("sluice.control.v1")

// IsControl reports whether an entry with this type and these extensions
// is a control entry.
func IsControl(typ raft.LogType, ext []byte) bool {
	return typ == raft.LogCommand && bytes.HasPrefix(ext, ControlExtension)
}

// isData reports whether e is a record batch in the partition log.
func (e *entry) isData() bool { return e.typ == raft.LogCommand && !IsControl(e.typ, e.ext) }

// Control entry kinds (the first byte of Data).
const (
	// ControlLogStart: the log start offset is now the int64 that
	// follows (big endian). Retention and DeleteRecords replicate it.
	ControlLogStart byte = 1
	// ControlMeterClose: close the partition's pending produce metering
	// into a range ending here; the int64 that follows (big endian) is
	// the leader's wall clock in unix milliseconds when it appended the
	// entry, the hour the range is billed in (partition/meter.go).
	ControlMeterClose byte = 2
)

// ControlKind is the kind of a control entry's data (0 if it has none).
func ControlKind(data []byte) byte {
	if len(data) == 0 {
		return 0
	}
	return data[0]
}

// EncodeMeterClose is the data of a ControlMeterClose entry.
func EncodeMeterClose(atMillis int64) []byte { return encodeInt64(ControlMeterClose, atMillis) }

// EncodeMeterStart is the data of a ControlMeterClose entry that starts
// produce metering from the log rather than closing a range
// (partition/meter.go: after an upgrade from front-door metering):
// EncodeMeterClose's data and a last byte 1. A version that knows only
// closes refuses it as malformed, and so changes nothing.
func EncodeMeterStart(atMillis int64) []byte {
	return append(EncodeMeterClose(atMillis), 1)
}

// DecodeMeterEntry decodes EncodeMeterClose's and EncodeMeterStart's
// data: the time, and whether the entry is a start.
func DecodeMeterEntry(data []byte) (atMillis int64, start bool, err error) {
	if len(data) == 10 && data[9] == 1 {
		at, err := DecodeMeterClose(data[:9])
		return at, err == nil, err
	}
	at, err := DecodeMeterClose(data)
	return at, false, err
}

// DecodeMeterClose decodes EncodeMeterClose's data.
func DecodeMeterClose(data []byte) (int64, error) {
	return decodeInt64(ControlMeterClose, data, "meter close time")
}

// encodeInt64 is the data of a control entry of kind that carries one
// int64 (big endian).
func encodeInt64(kind byte, v int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, uint64(v))
}

// decodeInt64 decodes encodeInt64's data of kind; the int64 is never
// negative, and what names it in the error of one that is.
func decodeInt64(kind byte, data []byte, what string) (int64, error) {
	if len(data) != 9 || data[0] != kind {
		return 0, fmt.Errorf("%w: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	v := int64(binary.BigEndian.Uint64(data[1:]))
	if v < 0 {
		return 0, fmt.Errorf("%w: negative %s %d", ErrBadControl, what, v)
	}
	return v, nil
}

// ErrBadControl means a control entry's data did not decode.
var ErrBadControl = errors.New("raftlog: malformed control entry")

// EncodeLogStart is the data of a ControlLogStart entry.
func EncodeLogStart(offset int64) []byte { return encodeInt64(ControlLogStart, offset) }

// DecodeLogStart decodes EncodeLogStart's data.
func DecodeLogStart(data []byte) (int64, error) {
	return decodeInt64(ControlLogStart, data, "log start")
}

// Compaction's control entries (dataplane/partition, compact.go). Kind 2
// is left to the replication layer's next need.
const (
	// ControlClean: compact the log below UpTo with these parameters
	// (EncodeClean). Every replica's cleaner applies exactly them.
	ControlClean byte = 3
	// ControlRoll: roll the partition log here. The store rolls when it
	// stores the entry, so every replica's segments start at the same
	// offsets (a compacted log rolls only so).
	ControlRoll byte = 4
)

// Clean is a ControlClean entry's decision: log.CleanParams' fields that
// decide the output, in milliseconds, and the leader's segment bases below
// UpTo (log.Boundaries), at which every replica re-cuts its closed
// segments before it cleans (log.Recut): a log that rolled by its own
// clock before its topic was compacted has boundaries of its own.
type Clean struct {
	UpTo              int64   `json:"up_to"`
	Now               int64   `json:"now_ms"`
	DeleteRetentionMs int64   `json:"delete_retention_ms"`
	MinCompactionLag  int64   `json:"min_compaction_lag_ms"`
	Bases             []int64 `json:"bases,omitempty"`
}

// EncodeClean is the data of a ControlClean entry: the kind, the four
// fields, then the bases (8 bytes each, big endian; none in entries
// written before bases were replicated).
func EncodeClean(c Clean) []byte {
	b := make([]byte, 0, 33+8*len(c.Bases))
	b = append(b, ControlClean)
	for _, v := range []int64{c.UpTo, c.Now, c.DeleteRetentionMs, c.MinCompactionLag} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range c.Bases {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// DecodeClean decodes EncodeClean's data.
func DecodeClean(data []byte) (Clean, error) {
	if len(data) < 33 || (len(data)-33)%8 != 0 || data[0] != ControlClean {
		return Clean{}, fmt.Errorf("%w: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(data[1+8*i:])) }
	c := Clean{UpTo: v(0), Now: v(1), DeleteRetentionMs: v(2), MinCompactionLag: v(3)}
	if c.UpTo < 0 || c.DeleteRetentionMs < 0 || c.MinCompactionLag < 0 {
		return Clean{}, fmt.Errorf("%w: negative field in %+v", ErrBadControl, c)
	}
	for i := 4; 1+8*i < len(data); i++ {
		b := v(i)
		if b < 0 || b > c.UpTo || len(c.Bases) > 0 && b <= c.Bases[len(c.Bases)-1] {
			return Clean{}, fmt.Errorf("%w: segment base %d after %v, compaction point %d", ErrBadControl, b, c.Bases, c.UpTo)
		}
		c.Bases = append(c.Bases, b)
	}
	return c, nil
}

// EncodeRoll is the data of a ControlRoll entry.
func EncodeRoll() []byte { return []byte{ControlRoll} }

// isRoll reports whether an entry is a ControlRoll entry.
func isRoll(typ raft.LogType, ext, data []byte) bool {
	return IsControl(typ, ext) && len(data) == 1 && data[0] == ControlRoll
}

// Tenant moves across cells (dataplane/DESIGN.md, "Tenant moves across
// cells"). Kinds 16 and up; 5–15 are left to the other needs of the
// replication layer.
const (
	// ControlFence: the source side of a move. EncodeFence(true) fences
	// the partition: from its index on it refuses produce and records its
	// final end offset (the high watermark there). EncodeFence(false)
	// lifts the fence (a rollback before the destination is promoted).
	ControlFence byte = 16
	// ControlMirrorPromote: the destination side. A partition mirrored
	// from another cell takes produce from this entry on; the int64 that
	// follows is the source's fenced end offset, which the mirrored high
	// watermark must equal, or the entry is refused on every replica.
	ControlMirrorPromote byte = 17
	// ControlMirrorStart: the first entry of a mirror. It sets the log
	// start offset to the source's and installs the producer states of a
	// source snapshot taken at ProducersAt (EncodeMirrorStart); it is
	// refused unless the partition holds no data yet.
	ControlMirrorStart byte = 18
)

// MirrorExtension begins the Extensions of a mirror entry, a LogCommand
// whose Data is a record batch of another cell's partition, byte for
// byte, whose base offset and leader epoch the store keeps instead of
// assigning its own. It is not a control entry: its batch takes its Kafka
// offsets in the partition log like a produced one, so the bytes reach
// the disk once. The 8 bytes after it (big endian) are the entry's prev:
// the source offset it follows, the end of the source batch before it or
// where the pull began (MirrorExt).
var MirrorExtension = []byte("sluice.mirror.v1")

// MirrorExt is the Extensions of a mirror entry that follows source
// offset prev.
func MirrorExt(prev int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), MirrorExtension...), uint64(prev))
}

// MirrorPrev returns a mirror entry's prev; ok is false if ext is not a
// mirror entry's.
func MirrorPrev(ext []byte) (prev int64, ok bool) {
	if len(ext) != len(MirrorExtension)+8 || !bytes.HasPrefix(ext, MirrorExtension) {
		return 0, false
	}
	prev = int64(binary.BigEndian.Uint64(ext[len(MirrorExtension):]))
	return prev, prev >= 0
}

// IsMirror reports whether an entry with this type and these extensions
// is a mirror entry.
func IsMirror(typ raft.LogType, ext []byte) bool {
	_, ok := MirrorPrev(ext)
	return typ == raft.LogCommand && ok
}

// MirrorApplies decides a mirror entry whose batch is at base, following
// source offset prev, stored or applied right after Kafka offset end
// (the end of the entries before it: what the store holds, what the FSM
// applied). It lands only if it starts at or past end and follows
// nothing the partition lacks (prev ≤ end); otherwise it is a no-op: a
// re-pull (base < end), or an entry after one that a leader change lost
// (prev > end), which would leave a hole. The store and the FSM decide
// with it from the same entries, so every replica decides alike.
func MirrorApplies(base, prev, end int64) bool { return base >= end && prev <= end }

// EncodeFence is the data of a ControlFence entry: fence (true) or
// unfence (false).
func EncodeFence(fence bool) []byte {
	if fence {
		return []byte{ControlFence, 1}
	}
	return []byte{ControlFence, 0}
}

// DecodeFence decodes EncodeFence's data.
func DecodeFence(data []byte) (bool, error) {
	if len(data) != 2 || data[0] != ControlFence || data[1] > 1 {
		return false, fmt.Errorf("%w: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	return data[1] == 1, nil
}

// EncodeMirrorPromote is the data of a ControlMirrorPromote entry.
func EncodeMirrorPromote(end int64) []byte { return encodeInt64(ControlMirrorPromote, end) }

// DecodeMirrorPromote decodes EncodeMirrorPromote's data.
func DecodeMirrorPromote(data []byte) (int64, error) {
	return decodeInt64(ControlMirrorPromote, data, "promote end offset")
}

// MirrorStart is a ControlMirrorStart entry's content: where the mirror
// begins and the source's idempotent-producer states at ProducersAt (the
// source's high watermark when it took them). Mirror entries below
// ProducersAt are already in those states and are not recorded again.
type MirrorStart struct {
	LogStart    int64
	ProducersAt int64
	Producers   []MirrorProducer // ascending ID
}

// MirrorProducer is one producer id's state: its epoch and its remembered
// batches, oldest first.
type MirrorProducer struct {
	ID      int64
	Epoch   int16
	Batches []MirrorBatch
}

// MirrorBatch is one remembered batch of a producer.
type MirrorBatch struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
}

// maxMirrorBatches bounds the batches per producer a start entry carries
// (the newest ones): a partition remembers five.
const maxMirrorBatches = 255

// EncodeMirrorStart is the data of a ControlMirrorStart entry (big endian):
//
//	kind 18, logStart int64, producersAt int64, count uint32, then per
//	producer: id int64, epoch int16, batches uint8, then per batch:
//	firstSeq int32, lastSeq int32, baseOffset int64
func EncodeMirrorStart(m MirrorStart) []byte {
	b := []byte{ControlMirrorStart}
	b = binary.BigEndian.AppendUint64(b, uint64(m.LogStart))
	b = binary.BigEndian.AppendUint64(b, uint64(m.ProducersAt))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Producers)))
	for _, p := range m.Producers {
		b = binary.BigEndian.AppendUint64(b, uint64(p.ID))
		b = binary.BigEndian.AppendUint16(b, uint16(p.Epoch))
		batches := p.Batches[max(len(p.Batches)-maxMirrorBatches, 0):]
		b = append(b, byte(len(batches)))
		for _, pb := range batches {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.BaseOffset))
		}
	}
	return b
}

// DecodeMirrorStart decodes EncodeMirrorStart's data. It refuses negative
// offsets, producer ids that are negative or not ascending, and trailing
// bytes.
func DecodeMirrorStart(data []byte) (MirrorStart, error) {
	bad := func(why string) (MirrorStart, error) {
		return MirrorStart{}, fmt.Errorf("%w: mirror start: %s", ErrBadControl, why)
	}
	if len(data) < 21 || data[0] != ControlMirrorStart {
		return bad(fmt.Sprintf("%d bytes, kind %v", len(data), data[:min(len(data), 1)]))
	}
	m := MirrorStart{LogStart: int64(binary.BigEndian.Uint64(data[1:])), ProducersAt: int64(binary.BigEndian.Uint64(data[9:]))}
	if m.LogStart < 0 || m.ProducersAt < m.LogStart {
		return bad(fmt.Sprintf("log start %d, producers at %d", m.LogStart, m.ProducersAt))
	}
	n := binary.BigEndian.Uint32(data[17:])
	rest := data[21:]
	if uint64(n)*11 > uint64(len(rest)) {
		return bad(fmt.Sprintf("%d producers in %d bytes", n, len(rest)))
	}
	m.Producers = make([]MirrorProducer, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(rest) < 11 {
			return bad("truncated producer")
		}
		p := MirrorProducer{ID: int64(binary.BigEndian.Uint64(rest)), Epoch: int16(binary.BigEndian.Uint16(rest[8:]))}
		nb := int(rest[10])
		rest = rest[11:]
		if p.ID < 0 || (i > 0 && p.ID <= m.Producers[i-1].ID) {
			return bad(fmt.Sprintf("producer id %d out of order", p.ID))
		}
		if len(rest) < 16*nb {
			return bad("truncated producer batches")
		}
		for j := 0; j < nb; j++ {
			pb := MirrorBatch{
				FirstSeq:   int32(binary.BigEndian.Uint32(rest)),
				LastSeq:    int32(binary.BigEndian.Uint32(rest[4:])),
				BaseOffset: int64(binary.BigEndian.Uint64(rest[8:])),
			}
			if pb.FirstSeq < 0 || pb.LastSeq < 0 || pb.BaseOffset < 0 {
				return bad(fmt.Sprintf("producer %d batch %+v", p.ID, pb))
			}
			p.Batches = append(p.Batches, pb)
			rest = rest[16:]
		}
		m.Producers = append(m.Producers, p)
	}
	if len(rest) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(rest)))
	}
	return m, nil
}
