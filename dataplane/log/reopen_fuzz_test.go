package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReopenTimeIndexAndCheckpoint damages what FuzzRecovery leaves alone:
// a closed segment's time index and the log start checkpoint, the other
// two files a partition reads back from disk when it opens.
//
// Invariants:
//   - Open never panics; it fails only on a checkpoint it cannot read, and
//     then says so;
//   - nothing written is lost: the next offset is what was appended and a
//     read from the log start returns a suffix of what was written;
//   - the log start stays within [0, next offset];
//   - OffsetForTimestamp answers what a scan of the batches answers,
//     whatever the time index held (a damaged one is rebuilt, not
//     trusted).
func FuzzReopenTimeIndexAndCheckpoint(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{}, []byte("v1 3\n"))
	f.Add([]byte{}, []byte("v1 999\n"))
	f.Add([]byte{}, []byte("v1 -1\n"))
	f.Add([]byte{}, []byte("v2 1\n"))
	f.Add(appendTrailer(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 5000), 0), 1), []byte{})
	f.Add(appendTrailer(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 1), 3), 1), []byte("v1 0"))
	f.Add(make([]byte, 20), []byte{})
	f.Fuzz(func(t *testing.T, timeIndex, checkpoint []byte) {
		cfg := Config{Dir: t.TempDir(), IndexIntervalBytes: 1, Logger: testLogger(t)}
		// Batch i holds offsets 2i and 2i+1, timestamps 1000i and 1000i+1.
		written, segs := writeTwoSegments(t, cfg, func(i int) []byte { return makeBatch(2, 30, int64(1000*i), uint64(i)) })
		if len(timeIndex) > 0 {
			if err := os.WriteFile(segmentPath(cfg.Dir, segs[0], timeIndexSuffix), timeIndex, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if len(checkpoint) > 0 {
			if err := os.WriteFile(filepath.Join(cfg.Dir, checkpointName), checkpoint, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l, err := Open(context.Background(), cfg)
		if err != nil {
			if len(checkpoint) == 0 {
				t.Fatalf("open with a damaged time index: %v", err)
			}
			if _, cerr := readCheckpoint(cfg.Dir); cerr == nil {
				t.Fatalf("open failed though the checkpoint reads: %v", err)
			}
			return
		}
		defer l.Close()
		start, next := l.LogStartOffset(), l.NextOffset()
		if next != 8 {
			t.Fatalf("next offset %d after reopening, want 8", next)
		}
		if start < 0 || start > next {
			t.Fatalf("log start %d outside [0, %d]", start, next)
		}
		if got := readAll(t, l, start); !bytes.HasSuffix(written, got) || (start < next && len(got) == 0) {
			t.Fatalf("read from the log start %d returned %d bytes that are not a suffix of what was written", start, len(got))
		}
		for _, ts := range []int64{-1, 0, 1, 999, 1000, 1001, 1002, 2500, 3001, 3002, 1 << 40} {
			off, found, err := l.OffsetForTimestamp(ts)
			if err != nil {
				t.Fatalf("offset for timestamp %d: %v", ts, err)
			}
			wantOff, wantFound := int64(0), false
			for i := int64(0); i < 4; i++ {
				if 2*i+2 > start && 1000*i+1 >= ts {
					wantOff, wantFound = max(2*i, start), true
					break
				}
			}
			if found != wantFound || (found && off != wantOff) {
				t.Fatalf("offset for timestamp %d (log start %d): %d, %v; a scan says %d, %v", ts, start, off, found, wantOff, wantFound)
			}
		}
	})
}
