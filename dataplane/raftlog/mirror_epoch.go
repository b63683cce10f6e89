package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// A promoted mirror's leader epochs (DESIGN.md, "Tenant moves across
// cells"). A mirror keeps the source's batches at the source's epochs,
// while its own Raft terms start from 1; a client that saw the source's
// epoch would take the destination's own epochs for stale ones. So the
// promote entry carries an epoch base, at least every epoch the source
// wrote or served, and from the promotion on every epoch the partition
// exposes is base + term. The batches of a promoted mirror carry the base
// in their entry's Extensions (EpochExt): the store stamps base + term as
// their leader epoch and recovery checks them against it, with no state
// of its own to keep across restarts, seeds and checkpoints.

// MirrorPromote is a ControlMirrorPromote entry's content.
type MirrorPromote struct {
	// End is the source's fenced end offset, which the mirrored high
	// watermark must equal.
	End int64
	// EpochBase is added to the Raft term for every leader epoch the
	// partition exposes once promoted; 0 in entries written before it
	// was carried.
	EpochBase int32
}

// EncodePromote is the data of a ControlMirrorPromote entry: kind 17,
// end int64, epoch base int32 (big endian). EncodeMirrorPromote is the
// older form without the base, which DecodePromote still reads.
func EncodePromote(p MirrorPromote) []byte {
	return binary.BigEndian.AppendUint32(EncodeMirrorPromote(p.End), uint32(p.EpochBase))
}

// DecodePromote decodes EncodePromote's data and EncodeMirrorPromote's
// (base 0). It refuses a negative end or base and any other length.
func DecodePromote(data []byte) (MirrorPromote, error) {
	if len(data) == 9 {
		end, err := DecodeMirrorPromote(data)
		return MirrorPromote{End: end}, err
	}
	if len(data) != 13 || data[0] != ControlMirrorPromote {
		return MirrorPromote{}, fmt.Errorf("%w: promote: %d bytes, kind %v", ErrBadControl, len(data), data[:min(len(data), 1)])
	}
	end, err := DecodeMirrorPromote(data[:9])
	if err != nil {
		return MirrorPromote{}, err
	}
	base := int32(binary.BigEndian.Uint32(data[9:]))
	if base < 0 {
		return MirrorPromote{}, fmt.Errorf("%w: negative promote epoch base %d", ErrBadControl, base)
	}
	return MirrorPromote{End: end, EpochBase: base}, nil
}

// EpochExtension begins the Extensions of a data entry of a promoted
// mirror; the 4 bytes after it (big endian) are the epoch base (EpochExt).
var EpochExtension = []byte("sluice.epoch.v1")

// EpochExt is the Extensions of a data entry whose leader epoch is base +
// its term.
func EpochExt(base int32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), EpochExtension...), uint32(base))
}

// EpochBase returns a data entry's epoch base: 0 for an entry without
// EpochExt. ok is false for extensions that begin with EpochExtension
// but are not one (wrong length, negative base).
func EpochBase(ext []byte) (base int32, ok bool) {
	if !bytes.HasPrefix(ext, EpochExtension) {
		return 0, true
	}
	if len(ext) != len(EpochExtension)+4 {
		return 0, false
	}
	base = int32(binary.BigEndian.Uint32(ext[len(EpochExtension):]))
	return base, base >= 0
}

// EntryEpoch is the leader epoch of a data entry of this term and these
// extensions: its term plus its epoch base. ok is false if that does not
// fit an int32 leader epoch or the extensions are malformed.
func EntryEpoch(term uint64, ext []byte) (epoch int32, ok bool) {
	base, ok := EpochBase(ext)
	if !ok || term > math.MaxInt32-uint64(base) {
		return -1, false
	}
	return int32(uint64(base) + term), true
}

// epochIs reports whether a batch stamped with epoch is data entry e's.
func (e *entry) epochIs(epoch int32) bool {
	want, ok := EntryEpoch(e.term, e.ext)
	return ok && want == epoch
}
