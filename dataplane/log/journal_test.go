package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/dataplane/journal"
)

// journaled is a log whose appends are made durable through a journal.
type journaled struct {
	root string
	j    *journal.Journal
	y    *Syncer
}

func openJournaled(t *testing.T, root string) (*journaled, journal.Report) {
	t.Helper()
	j, rep, err := journal.Open(root, journal.Options{FileBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &journaled{root: root, j: j, y: NewJournalSyncer(j)}, rep
}

func (w *journaled) open(t *testing.T, segmentBytes int64) *Log {
	t.Helper()
	return openLog(t, Config{Dir: filepath.Join(w.root, "p", "log"), Journal: w.j, SegmentBytes: segmentBytes, Logger: testLogger(t)})
}

func (w *journaled) sync(t *testing.T, l *Log) {
	t.Helper()
	if err := w.y.Sync(l); err != nil {
		t.Fatal(err)
	}
	if d, n := l.DurableOffset(), l.NextOffset(); d != n {
		t.Fatalf("durable offset %d after a round, log end %d", d, n)
	}
}

// crashImage copies the tree under root as a power cut would leave it
// with l open: each segment file holds only what fdatasync made durable
// in the file itself; the journal's files are copied whole (their writes
// are synced as they are made).
func crashImage(t *testing.T, root string, l *Log) string {
	t.Helper()
	return testkit.CrashImage(t, root, l.FileDurable())
}

// TestJournalSurvivesPowerCut: batches a journal round made durable, and
// never fdatasynced in their segment, are all there after a power cut:
// the next start replays them before the log opens. Rolls, a truncation
// (a Raft conflict) that rewrites the tail differently, and a log closed,
// removed and created again in the same directory all leave the log
// exactly as it was acknowledged, with no stale byte replayed over it.
func TestJournalSurvivesPowerCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seg   int64 // segment.bytes
		steps func(t *testing.T, w *journaled, l *Log) (*Log, [][]byte)
	}{
		{"appends and rolls", 4096, func(t *testing.T, w *journaled, l *Log) (*Log, [][]byte) {
			var want [][]byte
			for i := range 40 {
				b := makeBatch(3, 200, int64(i), uint64(i))
				want = append(want, appendBatch(t, l, b))
				if i%3 == 0 {
					w.sync(t, l)
				}
			}
			w.sync(t, l)
			return l, want
		}},
		{"truncation rewrites the tail", 1 << 20, func(t *testing.T, w *journaled, l *Log) (*Log, [][]byte) {
			var want [][]byte
			for i := range 10 {
				want = append(want, appendBatch(t, l, makeBatch(2, 300, int64(i), uint64(i))))
			}
			w.sync(t, l)
			h, _ := ParseHeader(want[4])
			if err := l.TruncateTo(h.BaseOffset); err != nil {
				t.Fatal(err)
			}
			want = want[:4]
			for i := range 3 {
				want = append(want, appendBatch(t, l, makeBatch(1, 50, int64(i), uint64(100+i))))
			}
			w.sync(t, l)
			// Then synced in the file itself (a checkpoint, a roll): not
			// journaled, so only the fence keeps the truncated batches'
			// records from being replayed over these.
			for i := range 3 {
				want = append(want, appendBatch(t, l, makeBatch(1, 50, int64(i), uint64(200+i))))
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			return l, want
		}},
		{"closed, removed and created again", 1 << 20, func(t *testing.T, w *journaled, l *Log) (*Log, [][]byte) {
			for i := range 10 {
				appendBatch(t, l, makeBatch(4, 500, int64(i), uint64(i)))
			}
			w.sync(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(l.Dir()); err != nil {
				t.Fatal(err)
			}
			l = w.open(t, 1<<20)
			want := [][]byte{appendBatch(t, l, makeBatch(1, 20, 0, 998))}
			w.sync(t, l)
			want = append(want, appendBatch(t, l, makeBatch(1, 20, 0, 999)))
			if err := l.Sync(); err != nil { // as a checkpoint would
				t.Fatal(err)
			}
			return l, want
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := openJournaled(t, t.TempDir())
			l := w.open(t, tc.seg)
			l, want := tc.steps(t, w, l)
			img := crashImage(t, w.root, l)
			w2, rep := openJournaled(t, img)
			if rep.Replayed == 0 {
				t.Fatalf("no record was replayed (%+v): the test shows nothing", rep)
			}
			l2 := w2.open(t, tc.seg)
			got := splitBatches(t, readAll(t, l2, l2.LogStartOffset()))
			if len(got) != len(want) {
				t.Fatalf("%d batches after the power cut, want %d (replay %+v)", len(got), len(want), rep)
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("batch %d differs after the power cut (replay %+v)", i, rep)
				}
			}
		})
	}
}

// appendBatch appends b and returns it as the log stored it.
func appendBatch(t *testing.T, l *Log, b []byte) []byte {
	t.Helper()
	base, _, err := l.Append(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := readBatchAt(l, base)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readBatchAt(l *Log, offset int64) ([]byte, error) {
	_, b, err := l.ReadBatch(offset, nil)
	return b, err
}
