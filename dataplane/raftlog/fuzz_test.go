package raftlog

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzParseRecord feeds arbitrary bytes to the entries-file decoder, which
// reads them back from disk after a crash. Invariants: it never panics; a
// record it accepts is no longer than its input, and encoding the decoded
// entry gives back exactly the bytes it consumed.
func FuzzParseRecord(f *testing.F) {
	f.Add(appendRecord(nil, 7, entry{term: 3, typ: raft.LogCommand, at: 10, count: 4}))
	f.Add(appendRecord(nil, 1, entry{term: 1, typ: raft.LogConfiguration, data: []byte("cfg"), ext: []byte("x")}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		index, e, n, ok := parseRecord(b)
		if !ok {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if again := appendRecord(nil, index, e); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b[:n])
		}
	})
}

// FuzzStableDecode: the stable store file decoder never panics on
// arbitrary bytes, and what it accepts survives an encode/decode round trip.
func FuzzStableDecode(f *testing.F) {
	s := &StableStore{kv: map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 5}, "LastVoteCand": []byte("b1")}}
	f.Add(s.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &StableStore{kv: map[string][]byte{}}
		if err := s.decode(b); err != nil {
			return
		}
		s2 := &StableStore{kv: map[string][]byte{}}
		if err := s2.decode(s.encode()); err != nil {
			t.Fatalf("re-encoded store does not decode: %v", err)
		}
		if len(s2.kv) != len(s.kv) {
			t.Fatalf("round trip: %d keys, want %d", len(s2.kv), len(s.kv))
		}
		for k, v := range s.kv {
			if !bytes.Equal(s2.kv[k], v) {
				t.Fatalf("round trip: key %q is %x, want %x", k, s2.kv[k], v)
			}
		}
	})
}

// FuzzStableSlots: the two-slot decoder never panics on arbitrary bytes
// of the file's size, and a store it accepts is rewritten and read back
// the same.
func FuzzStableSlots(f *testing.F) {
	s := &StableStore{kv: map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 5}, "LastVoteCand": []byte("b1")}}
	a, _ := s.slot(3)
	c, _ := s.slot(4)
	f.Add(append(a, c...))
	f.Add(append(make([]byte, stableSlot), c...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 2*stableSlot {
			return
		}
		b = append(b, make([]byte, 2*stableSlot-len(b))...)
		s := &StableStore{kv: map[string][]byte{}}
		if err := s.decodeSlots(b); err != nil {
			return
		}
		next, err := s.slot(s.seq + 1)
		if err != nil {
			t.Fatalf("accepted store does not fit a slot: %v", err)
		}
		s2 := &StableStore{kv: map[string][]byte{}}
		if err := s2.decodeSlots(append(next, make([]byte, stableSlot)...)); err != nil || s2.seq != s.seq+1 {
			t.Fatalf("rewritten slot: seq %d, %v; want seq %d", s2.seq, err, s.seq+1)
		}
		for k, v := range s.kv {
			if !bytes.Equal(s2.kv[k], v) {
				t.Fatalf("round trip: key %q is %x, want %x", k, s2.kv[k], v)
			}
		}
	})
}

// FuzzDecodeLogStart decodes control-entry data as a follower's FSM gets
// it from the network or the entries file. Invariants: it never panics;
// an accepted offset is ≥ 0 and encodes back to the same bytes.
func FuzzDecodeLogStart(f *testing.F) {
	f.Add(EncodeLogStart(0))
	f.Add(EncodeLogStart(1 << 40))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		off, err := DecodeLogStart(b)
		if err != nil {
			return
		}
		if off < 0 || !bytes.Equal(EncodeLogStart(off), b) {
			t.Fatalf("decoded %d from %x", off, b)
		}
	})
}

// FuzzDecodeMeterClose decodes a meter close entry's data as a follower's
// FSM gets it. Invariants: it never panics; an accepted time is ≥ 0 and
// encodes back to the same bytes; no log start entry decodes as one.
func FuzzDecodeMeterClose(f *testing.F) {
	f.Add(EncodeMeterClose(0))
	f.Add(EncodeMeterClose(1_800_000_000_000))
	f.Add(EncodeLogStart(7))
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		at, err := DecodeMeterClose(b)
		if err != nil {
			return
		}
		if at < 0 || !bytes.Equal(EncodeMeterClose(at), b) || ControlKind(b) != ControlMeterClose {
			t.Fatalf("decoded %d from %x", at, b)
		}
	})
}

// FuzzDecodeMeterEntry decodes a meter close or start entry's data.
// Invariants: it never panics; an accepted time is ≥ 0 and encodes back,
// as a start or a close, to the same bytes.
func FuzzDecodeMeterEntry(f *testing.F) {
	f.Add(EncodeMeterClose(5))
	f.Add(EncodeMeterStart(1_800_000_000_000))
	f.Add(append(EncodeMeterClose(5), 2))
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		at, start, err := DecodeMeterEntry(b)
		if err != nil {
			return
		}
		enc := EncodeMeterClose(at)
		if start {
			enc = EncodeMeterStart(at)
		}
		if at < 0 || !bytes.Equal(enc, b) || ControlKind(b) != ControlMeterClose {
			t.Fatalf("decoded %d, start %v from %x", at, start, b)
		}
	})
}

// FuzzDecodeClean decodes compaction-decision data as a follower's FSM
// gets it from the network or the entries file. Invariants: it never
// panics; an accepted decision has no negative point or duration, its
// segment bases ascend strictly up to the point at most, and it encodes
// back to the same bytes.
func FuzzDecodeClean(f *testing.F) {
	f.Add(EncodeClean(Clean{UpTo: 10, Now: 1 << 40, DeleteRetentionMs: 86400000}))
	f.Add(EncodeClean(Clean{}))
	f.Add(EncodeClean(Clean{UpTo: 10, Bases: []int64{0, 4, 10}}))
	f.Add(EncodeRoll())
	f.Add([]byte{ControlClean})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeClean(b)
		if err != nil {
			return
		}
		if c.UpTo < 0 || c.DeleteRetentionMs < 0 || c.MinCompactionLag < 0 || !bytes.Equal(EncodeClean(c), b) ||
			!slices.IsSorted(c.Bases) || len(c.Bases) > 0 && (c.Bases[0] < 0 || c.Bases[len(c.Bases)-1] > c.UpTo) {
			t.Fatalf("decoded %+v from %x", c, b)
		}
	})
}

// FuzzDecodeFence decodes a fence entry's data as a follower's FSM gets
// it. Invariants: it never panics; accepted data encodes back to the same
// bytes; no other kind decodes as one.
func FuzzDecodeFence(f *testing.F) {
	f.Add(EncodeFence(true))
	f.Add(EncodeFence(false))
	f.Add(EncodeMirrorPromote(3))
	f.Add([]byte{ControlFence, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		fence, err := DecodeFence(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeFence(fence), b) || ControlKind(b) != ControlFence {
			t.Fatalf("decoded %v from %x", fence, b)
		}
	})
}

// FuzzDecodeMirrorPromote decodes a promote entry's data, in the older
// form (end only) and the current one (end, epoch base). Invariants: it
// never panics; accepted data has an end offset and an epoch base ≥ 0 and
// encodes back to the same bytes in its own form (an older entry has base
// 0); the older decoder accepts exactly the older form.
func FuzzDecodeMirrorPromote(f *testing.F) {
	f.Add(EncodeMirrorPromote(0))
	f.Add(EncodeMirrorPromote(1 << 40))
	f.Add(EncodePromote(MirrorPromote{End: 1 << 40, EpochBase: 57}))
	f.Add(EncodePromote(MirrorPromote{End: 3, EpochBase: -1}))
	f.Add(EncodeLogStart(7))
	f.Add([]byte{ControlMirrorPromote, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		end, oldErr := DecodeMirrorPromote(b)
		if oldErr == nil && (end < 0 || !bytes.Equal(EncodeMirrorPromote(end), b)) {
			t.Fatalf("decoded %d from %x", end, b)
		}
		p, err := DecodePromote(b)
		if err != nil {
			if oldErr == nil {
				t.Fatalf("the older form %x decodes alone: %v", b, err)
			}
			return
		}
		again := EncodePromote(p)
		if oldErr == nil {
			again = EncodeMirrorPromote(p.End)
			if p.End != end || p.EpochBase != 0 {
				t.Fatalf("older form %x decoded as %+v", b, p)
			}
		}
		if p.End < 0 || p.EpochBase < 0 || !bytes.Equal(again, b) || ControlKind(b) != ControlMirrorPromote {
			t.Fatalf("decoded %+v from %x", p, b)
		}
	})
}

// FuzzEpochBase decodes a data entry's extensions as the store and the
// FSM read them for its epoch base (they arrive from the leader, or from
// the entries file). Invariants: it never panics; an accepted base is ≥
// 0, and extensions that begin with EpochExtension are accepted only as
// EpochExt(base) itself; EntryEpoch is then base + term when that fits
// an int32 and refused otherwise.
func FuzzEpochBase(f *testing.F) {
	f.Add(EpochExt(0), uint64(1))
	f.Add(EpochExt(1<<30), uint64(1<<31))
	f.Add(EpochExt(-5), uint64(2))
	f.Add(MirrorExt(7), uint64(3))
	f.Add(append([]byte(nil), EpochExtension...), uint64(4))
	f.Fuzz(func(t *testing.T, ext []byte, term uint64) {
		base, ok := EpochBase(ext)
		if !ok {
			if _, ok := EntryEpoch(term, ext); ok {
				t.Fatalf("entry epoch from malformed extensions %x", ext)
			}
			return
		}
		if base < 0 || bytes.HasPrefix(ext, EpochExtension) && !bytes.Equal(EpochExt(base), ext) ||
			!bytes.HasPrefix(ext, EpochExtension) && base != 0 {
			t.Fatalf("base %d from %x", base, ext)
		}
		epoch, ok := EntryEpoch(term, ext)
		fits := term <= math.MaxInt32-uint64(base)
		if ok != fits || ok && uint64(epoch) != uint64(base)+term {
			t.Fatalf("entry epoch %d, %v for term %d, base %d", epoch, ok, term, base)
		}
	})
}

// FuzzDecodeMirrorStart decodes a mirror start entry's data, which carries
// another cell's producer states. Invariants: it never panics; what it
// accepts has no negative offset or producer id, ascending producer ids,
// and encodes back to exactly the input.
func FuzzDecodeMirrorStart(f *testing.F) {
	f.Add(EncodeMirrorStart(MirrorStart{}))
	f.Add(EncodeMirrorStart(MirrorStart{LogStart: 40, ProducersAt: 90, Producers: []MirrorProducer{
		{ID: 7, Epoch: 1, Batches: []MirrorBatch{{FirstSeq: 0, LastSeq: 3, BaseOffset: 40}, {FirstSeq: 4, LastSeq: 4, BaseOffset: 60}}},
		{ID: 9},
	}}))
	f.Add([]byte{ControlMirrorStart, 0, 0})
	f.Add([]byte{ControlMirrorStart, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMirrorStart(b)
		if err != nil {
			return
		}
		if m.LogStart < 0 || m.ProducersAt < m.LogStart {
			t.Fatalf("accepted offsets %+v", m)
		}
		for i, p := range m.Producers {
			if p.ID < 0 || (i > 0 && p.ID <= m.Producers[i-1].ID) {
				t.Fatalf("accepted producer ids out of order: %+v", m.Producers)
			}
		}
		if again := EncodeMirrorStart(m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}

// FuzzMirrorPrev decodes a mirror entry's extensions, which arrive from
// the leader over the network and back from the entries file. Invariants:
// it never panics; an accepted prev is ≥ 0 and encodes back to the same
// bytes; no control entry's extensions decode as a mirror entry's.
func FuzzMirrorPrev(f *testing.F) {
	f.Add(MirrorExt(0))
	f.Add(MirrorExt(1 << 40))
	f.Add(append([]byte(nil), MirrorExtension...))
	f.Add(ControlExtension)
	f.Fuzz(func(t *testing.T, b []byte) {
		prev, ok := MirrorPrev(b)
		if !ok {
			return
		}
		if prev < 0 || !bytes.Equal(MirrorExt(prev), b) || IsControl(raft.LogCommand, b) {
			t.Fatalf("decoded %d from %x", prev, b)
		}
	})
}
