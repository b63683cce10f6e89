package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"testing"
)

// FuzzValidateBatch feeds arbitrary bytes to the batch decoder and validator.
//
// Invariants:
//   - ParseHeader, ValidateBatch and ValidateClientBatch never panic.
//   - If ValidateBatch accepts b, then b is exactly one batch: magic 2, the
//     length field equals len(b)-12, the CRC32C of b[21:] equals the CRC
//     field, NumRecords > 0 and LastOffsetDelta == NumRecords-1, and the
//     header it returns is the one ParseHeader decodes.
//   - ValidateClientBatch accepts only what ValidateBatch accepts, and never
//     a control batch or a nonzero base offset.
//   - Stamping an offset and epoch into an accepted batch keeps it valid.
func FuzzValidateBatch(f *testing.F) {
	good := makeBatch(3, 40, 1000, 9)
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add(makeBatch(1, 1, 0, 0))
	f.Add(make([]byte, HeaderSize))
	ctl := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(ctl[offAttributes:], attrControl)
	f.Add(recrc(ctl))
	f.Fuzz(func(t *testing.T, b []byte) {
		ph, perr := ParseHeader(b)
		h, err := ValidateBatch(b)
		ch, cerr := ValidateClientBatch(b)
		if cerr == nil {
			if err != nil {
				t.Fatalf("client validator accepted what the validator rejected: %v", err)
			}
			if ch.IsControl() || ch.BaseOffset != 0 {
				t.Fatalf("client validator accepted %+v", ch)
			}
		}
		if err != nil {
			return
		}
		if perr != nil || ph != h {
			t.Fatalf("ParseHeader disagrees: %+v %v vs %+v", ph, perr, h)
		}
		if h.Magic != 2 || h.Size() != int64(len(b)) || h.NumRecords <= 0 || h.LastOffsetDelta != h.NumRecords-1 {
			t.Fatalf("accepted inconsistent batch %+v (len %d)", h, len(b))
		}
		if crc32.Checksum(b[offAttributes:], castagnoli) != binary.BigEndian.Uint32(b[offCRC:]) {
			t.Fatal("accepted a CRC mismatch")
		}
		c := append([]byte(nil), b...)
		stamp(c, 12345, 6)
		if _, err := ValidateBatch(c); err != nil {
			t.Fatalf("stamping broke a valid batch: %v", err)
		}
	})
}

// longestValidPrefix is the reference for recovery, written independently
// of the segment scanner: it walks b as consecutive batches from base,
// accepting each one ValidateBatch accepts whose base offset continues the
// sequence, and returns the number of bytes accepted.
func longestValidPrefix(b []byte, base int64) int {
	segBase := base
	pos := 0
	for pos+HeaderSize <= len(b) {
		n := int64(binary.BigEndian.Uint32(b[pos+offLength:])) + lengthOverhead
		if n < HeaderSize || n > int64(len(b)-pos) {
			break
		}
		h, err := ValidateBatch(b[pos : pos+int(n)])
		if err != nil || h.BaseOffset != base || h.LastOffset()-segBase > maxRelOffset {
			break
		}
		pos += int(n)
		base = h.NextOffset()
	}
	return pos
}

// FuzzRecovery writes a few batches through the log into a closed segment
// and an active one, then puts arbitrary bytes over the closed segment's
// offset index and after the end of the active segment, and reopens.
//
// Invariants:
//   - Open never panics and never fails on such damage.
//   - Every batch written through the log is still there, byte for byte.
//   - Recovery keeps exactly the longest valid prefix of the active segment
//     (longestValidPrefix): nothing valid is cut, nothing invalid is kept.
//   - Reads serve only bytes of that prefix, so never a batch that was not
//     written, and the log accepts appends at the recovered end.
//   - BytesBetween over the whole log equals the bytes served, and every
//     offset's batch timestamp reads.
func FuzzRecovery(f *testing.F) {
	next := makeBatch(2, 30, 0, 0)
	stamp(next, 8, 0) // continues the sequence: a valid batch in the tail
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 2, 3}, []byte{0, 0, 0, 0})
	f.Add(next, []byte{})
	f.Add(next[:len(next)-5], make([]byte, 16))
	f.Add(append(append([]byte(nil), next...), 0xff), []byte{})
	f.Add(make([]byte, 200), appendTrailer(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), 7), 1))
	f.Fuzz(func(t *testing.T, tail, index []byte) {
		cfg := Config{Dir: t.TempDir(), IndexIntervalBytes: 1, Logger: testLogger(t)}
		written, segs := writeTwoSegments(t, cfg, func(i int) []byte { return makeBatch(2, 30, int64(i), uint64(2*i)) })
		if len(index) > 0 {
			if err := os.WriteFile(segmentPath(cfg.Dir, segs[0], indexSuffix), index, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		active := segmentPath(cfg.Dir, segs[1], logSuffix)
		if len(tail) > 0 {
			appendFile(t, active, tail)
		}
		onDisk, err := os.ReadFile(active)
		if err != nil {
			t.Fatal(err)
		}
		want := longestValidPrefix(onDisk, segs[1])

		l, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatalf("open after damage: %v", err)
		}
		defer l.Close()
		fi, err := os.Stat(active)
		if err != nil || fi.Size() != int64(want) {
			t.Fatalf("recovered active segment is %d bytes, longest valid prefix %d (%v)", fi.Size(), want, err)
		}
		got := readAll(t, l, 0)
		if !bytes.HasPrefix(got, written) {
			t.Fatal("a written batch is missing or changed")
		}
		closed, _ := os.ReadFile(segmentPath(cfg.Dir, segs[0], logSuffix))
		if !bytes.Equal(got, append(closed, onDisk[:want]...)) {
			t.Fatal("served bytes are not the recovered prefix")
		}
		// The lag accessors read the recovered segments (a damaged index
		// included) consistently: the whole log sums to what is served,
		// and every batch has its timestamp.
		if n, err := l.BytesBetween(0, l.NextOffset()); err != nil || n != int64(len(got)) {
			t.Fatalf("BytesBetween over the whole log = %d, %v; %d bytes are served", n, err, len(got))
		}
		for off := int64(0); off < l.NextOffset(); off++ {
			if _, err := l.BatchMaxTimestamp(off); err != nil {
				t.Fatalf("BatchMaxTimestamp(%d): %v", off, err)
			}
		}
		if _, _, err := l.Append(makeBatch(1, 1, 0, 0), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if sl, err := l.Read(0, math.MaxInt32, math.MaxInt64); err != nil || sl.Size == 0 {
			t.Fatalf("read after recovery: %v", err)
		} else {
			sl.Release()
		}
	})
}

// writeTwoSegments opens a log with cfg, appends batch(0) to batch(3),
// rolling before the third so two segments hold two each, and closes it. It
// returns the bytes appended and the segments' base offsets.
func writeTwoSegments(t *testing.T, cfg Config, batch func(i int) []byte) ([]byte, []int64) {
	t.Helper()
	l, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var written []byte
	for i := range 4 {
		if i == 2 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		b := batch(i)
		if _, _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		written = append(written, b...)
	}
	segs := l.Segments()
	l.Close()
	return written, segs
}
