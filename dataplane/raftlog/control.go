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
func EncodeMeterClose(atMillis int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{ControlMeterClose}, uint64(atMillis))
}

// DecodeMeterClose decodes EncodeMeterClose's data.
func DecodeMeterClose(data []byte) (int64, error) {
	if len(data) != 9 || data[0] != ControlMeterClose {
		return 0, fmt.Errorf("%w: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	at := int64(binary.BigEndian.Uint64(data[1:]))
	if at < 0 {
		return 0, fmt.Errorf("%w: negative meter close time %d", ErrBadControl, at)
	}
	return at, nil
}

// ErrBadControl means a control entry's data did not decode.
var ErrBadControl = errors.New("raftlog: malformed control entry")

// EncodeLogStart is the data of a ControlLogStart entry.
func EncodeLogStart(offset int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{ControlLogStart}, uint64(offset))
}

// DecodeLogStart decodes EncodeLogStart's data.
func DecodeLogStart(data []byte) (int64, error) {
	if len(data) != 9 || data[0] != ControlLogStart {
		return 0, fmt.Errorf("%w: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	off := int64(binary.BigEndian.Uint64(data[1:]))
	if off < 0 {
		return 0, fmt.Errorf("%w: negative log start %d", ErrBadControl, off)
	}
	return off, nil
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
