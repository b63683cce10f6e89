package log

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSeedSegmentsAndVerify: the source lists the files holding a range,
// the last one cut where the range ends; their bytes read back equal the
// files; a copy torn mid-batch, or with a corrupt batch, is cut after the
// last whole valid batch, which is where a resumed copy continues.
func TestSeedSegmentsAndVerify(t *testing.T) {
	l, err := Open(context.Background(), Config{Dir: t.TempDir(), SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 40 {
		if _, _, err := l.Append(makeBatch(2, 100, 0, uint64(i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteHead(10); err != nil {
		t.Fatal(err)
	}
	start, segs, err := l.SeedSegments(4, 60)
	if err != nil || start != 10 || len(segs) < 3 {
		t.Fatalf("seed segments: start %d, %+v, %v", start, segs, err)
	}
	if segs[0].Base > 10 || segs[len(segs)-1].Base >= 60 {
		t.Fatalf("segments %+v do not cover [10, 60)", segs)
	}
	dir := t.TempDir()
	var last SeedSegment
	for _, s := range segs {
		buf := make([]byte, s.Size+10)
		n, err := l.ReadSegment(s.Base, 0, s.Size, buf)
		if err != nil || int64(n) != s.Size {
			t.Fatalf("read segment %d: %d of %d, %v", s.Base, n, s.Size, err)
		}
		file, err := os.ReadFile(filepath.Join(l.cfg.Dir, SegmentFileName(s.Base)))
		if err != nil || !bytes.Equal(file[:n], buf[:n]) {
			t.Fatalf("segment %d read back differs from the file: %v", s.Base, err)
		}
		if err := os.WriteFile(filepath.Join(dir, SegmentFileName(s.Base)), buf[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		last = s
	}
	// The last listed segment ends where offset 60 starts.
	path := filepath.Join(dir, SegmentFileName(last.Base))
	size, next, err := VerifySegmentFile(path, last.Base, last.Size)
	if err != nil || size != last.Size || next != 60 {
		t.Fatalf("verify the last segment: size %d of %d, next %d, %v", size, last.Size, next, err)
	}
	if _, _, err := l.SeedSegments(4, 61); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a range ending inside a batch: %v", err)
	}
	if _, err := l.ReadSegment(0, 0, 10, make([]byte, 10)); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of a deleted segment: %v", err)
	}

	// Torn: the copy stops 30 bytes into a batch.
	first := filepath.Join(dir, SegmentFileName(segs[0].Base))
	full, _ := os.ReadFile(first)
	whole, _, err := VerifySegmentFile(first, segs[0].Base, segs[0].Size)
	if err != nil || whole != int64(len(full)) {
		t.Fatalf("verify a whole copy: %d of %d, %v", whole, len(full), err)
	}
	h, _ := ParseHeader(full)
	if err := os.Truncate(first, h.Size()+30); err != nil {
		t.Fatal(err)
	}
	if size, next, err := VerifySegmentFile(first, segs[0].Base, segs[0].Size); err != nil || size != h.Size() || next != h.NextOffset() {
		t.Fatalf("verify a torn copy: kept %d (want %d), next %d, %v", size, h.Size(), next, err)
	}
	if fi, _ := os.Stat(first); fi.Size() != h.Size() {
		t.Fatalf("the torn tail was not cut: %d bytes", fi.Size())
	}
	// Corrupt: a flipped byte in the second batch.
	full[h.Size()+HeaderSize+5] ^= 0xff
	if err := os.WriteFile(first, full, 0o644); err != nil {
		t.Fatal(err)
	}
	if size, _, err := VerifySegmentFile(first, segs[0].Base, segs[0].Size); err != nil || size != h.Size() {
		t.Fatalf("verify a corrupt copy: kept %d, want %d, %v", size, h.Size(), err)
	}
}
