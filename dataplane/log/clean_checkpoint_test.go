package log

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestCleanCheckpointSameBytes: the cleaner's checkpoint changes no byte.
// A log cleaned once, then written to, is copied five ways before it is
// reopened and cleaned with the same two decisions as the original (which
// stays open): with its checkpoint, with the checkpoint lost, with a stale
// checkpoint (from an earlier cleaning, whose segments were rewritten
// since), with a corrupt one, and with one whose segment list names other
// sizes. Every copy ends with the original's segment files (SHA-256); the
// copy with its checkpoint maps keys from where the first cleaning ended
// and reads less than the copies without one; and a reopened log cleaned
// again with the decision it last applied reads and writes nothing.
func TestCleanCheckpointSameBytes(t *testing.T) {
	h := randomHistory(41, 1200, 200, true)
	span := time.Duration(h.endTS()-h.ts0) * time.Millisecond
	a := cleanConfig(t, filepath.Join(t.TempDir(), "a"))
	la := openLog(t, a)
	ts := h.ts0
	write := func(batches [][]kv) {
		for _, recs := range batches {
			appendRolling(t, la, keyedBatch(ts, recs...))
			ts += int64(len(recs))
		}
		if err := la.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	clean := func(l *Log, p CleanParams) CleanResult {
		t.Helper()
		res, err := l.Clean(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	write(h.batches[:400])
	clean(la, CleanParams{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span})
	stale, err := os.ReadFile(filepath.Join(a.Dir, cleanCheckpointName))
	if err != nil {
		t.Fatalf("no checkpoint after a cleaning: %v", err)
	}
	write(h.batches[400:800])
	first := clean(la, CleanParams{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span})
	write(h.batches[800:])
	decisions := []CleanParams{
		{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span / 2, BoundTombstones: true, TombstonesBelow: first.End},
		{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span / 4, BoundTombstones: true, TombstonesBelow: la.NextOffset()},
	}
	type variant struct {
		name string
		ck   func(path string) // changes the copy's checkpoint file
	}
	variants := []variant{
		{"checkpoint", func(string) {}},
		{"lost", func(p string) { os.Remove(p) }},
		{"stale", func(p string) { os.WriteFile(p, stale, 0o644) }},
		{"corrupt", func(p string) { os.WriteFile(p, []byte("v1\nend x\n"), 0o644) }},
		{"other-sizes", func(p string) {
			c, err := decodeCleanCheckpoint(mustRead(t, p))
			if err != nil {
				t.Fatal(err)
			}
			c.Segs[len(c.Segs)-1].Size++
			os.WriteFile(p, encodeCleanCheckpoint(c), 0o644)
		}},
	}
	copies := map[string]*Log{}
	for _, v := range variants {
		cfg := cleanConfig(t, filepath.Join(t.TempDir(), v.name))
		copyDir(t, a.Dir, cfg.Dir)
		v.ck(filepath.Join(cfg.Dir, cleanCheckpointName))
		copies[v.name] = openLog(t, cfg)
	}
	if got := copies["checkpoint"].CleanedTo(); got != first.End {
		t.Fatalf("reopened with its checkpoint: CleanedTo %d, want %d", got, first.End)
	}
	for _, name := range []string{"lost", "stale", "corrupt", "other-sizes"} {
		if got := copies[name].CleanedTo(); got != -1 {
			t.Fatalf("reopened with a %s checkpoint: CleanedTo %d, want -1 (not trusted)", name, got)
		}
	}
	for i, p := range decisions {
		want := clean(la, p)
		for _, v := range variants {
			got := clean(copies[v.name], p)
			t.Logf("decision %d, %s: %+v", i, v.name, got)
			if sa, sb := dirSums(t, a.Dir), dirSums(t, copies[v.name].Dir()); !reflect.DeepEqual(sa, sb) {
				t.Fatalf("decision %d: the copy with a %s checkpoint differs from the original", i, v.name)
			}
			if i == 0 && v.name == "checkpoint" && (got.MappedFrom != first.End || got.BytesRead != want.BytesRead) {
				t.Fatalf("decision 0 with the checkpoint: mapped from %d and read %d bytes, want %d and %d as in place",
					got.MappedFrom, got.BytesRead, first.End, want.BytesRead)
			}
			if i == 0 && v.name != "checkpoint" && got.BytesRead <= want.BytesRead {
				t.Fatalf("decision 0 with a %s checkpoint read %d bytes, want more than the %d of a dirty map", v.name, got.BytesRead, want.BytesRead)
			}
		}
	}
	checkRecords(t, logRecords(t, la), h.model(h.endTS()+1-(span/4).Milliseconds()))

	// Cleaning again with the last decision, in place or after a restart,
	// does nothing, and the files stay the same.
	last := decisions[len(decisions)-1]
	sums := dirSums(t, a.Dir)
	la.Close()
	lr := openLog(t, a)
	for _, l := range []*Log{copies["lost"], lr} {
		res := clean(l, last)
		if !res.Skipped || res.BytesRead != 0 || res.BytesWritten != 0 || res.End != last.UpTo {
			t.Fatalf("cleaning again with the same decision: %+v, want it skipped at %d", res, last.UpTo)
		}
	}
	if !reflect.DeepEqual(sums, dirSums(t, a.Dir)) {
		t.Fatal("a skipped cleaning changed the segment files")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanCheckpointDropped: a truncation into what the checkpoint lists
// removes the file before it cuts, and the next cleaning maps keys from
// the first segment; one above it keeps the file, which still holds after
// a restart. A replaced (seeded) log has no checkpoint.
func TestCleanCheckpointDropped(t *testing.T) {
	h := randomHistory(43, 600, 100, false)
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	h.write(t, l)
	res, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		appendRolling(t, l, keyedBatch(h.endTS()+1, kv{key: []byte("k1"), value: []byte("x")}))
	}
	ckPath := filepath.Join(cfg.Dir, cleanCheckpointName)
	// Above the checkpoint: kept.
	hb, _, err := l.ReadBatch(l.NextOffset()-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(hb.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ckPath); err != nil {
		t.Fatalf("a truncation above the cleaned point removed the checkpoint: %v", err)
	}
	l.Close()
	l = openLog(t, cfg)
	if got := l.CleanedTo(); got != res.End {
		t.Fatalf("after a truncation above it and a restart: CleanedTo %d, want %d", got, res.End)
	}
	// Into it: removed.
	segs := l.Segments()
	if err := l.TruncateTo(segs[len(segs)/2]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ckPath); !os.IsNotExist(err) {
		t.Fatalf("a truncation into the cleaned range left the checkpoint: %v", err)
	}
	if got := l.CleanedTo(); got != -1 {
		t.Fatalf("after a truncation into the cleaned range: CleanedTo %d, want -1", got)
	}
	r2, err := l.Clean(context.Background(), CleanParams{UpTo: l.ClosedEnd(), Now: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Skipped || r2.MappedFrom != l.Segments()[0] {
		t.Fatalf("after a truncation into the cleaned range: %+v, want a cleaning mapped from %d", r2, l.Segments()[0])
	}
	// A replace swaps in a directory without one.
	src := filepath.Join(t.TempDir(), "seed")
	copyDir(t, cfg.Dir, src)
	if _, err := os.Stat(filepath.Join(src, cleanCheckpointName)); err != nil {
		t.Fatalf("no checkpoint to test the replace with: %v", err)
	}
	os.Remove(filepath.Join(src, cleanCheckpointName))
	if err := l.Replace(context.Background(), src, filepath.Join(t.TempDir(), "old"), l.LogStartOffset()); err != nil {
		t.Fatal(err)
	}
	if got := l.CleanedTo(); got != -1 {
		t.Fatalf("after a replace: CleanedTo %d, want -1", got)
	}
}

// FuzzCleanCheckpoint feeds arbitrary bytes to the checkpoint's decoder.
// It must never panic; what it accepts has End at most the compaction
// point, segments in increasing order below End with non-negative sizes,
// and encodes back to exactly the bytes it was decoded from.
func FuzzCleanCheckpoint(f *testing.F) {
	f.Add(encodeCleanCheckpoint(cleanCheckpoint{End: 90, Params: checkpointParams{UpTo: 100, Now: 5, DeleteRetentionMs: 3, BoundTombstones: true, TombstonesBelow: 40},
		Segs: []checkpointSeg{{0, 100}, {40, 7}}}))
	f.Add([]byte("v1\nend 0\nparams 0 0 0 0 0 0\n"))
	f.Add([]byte("v1\nend 1\nparams 1 0 0 0 0 0\nseg 0 -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCleanCheckpoint(b)
		if err != nil {
			return
		}
		if c.End > c.Params.UpTo || c.End < 0 {
			t.Fatalf("accepted end %d with compaction point %d", c.End, c.Params.UpTo)
		}
		for i, s := range c.Segs {
			if s.Base >= c.End || s.Size < 0 || i > 0 && s.Base <= c.Segs[i-1].Base {
				t.Fatalf("accepted segment %d: %+v (end %d)", i, s, c.End)
			}
		}
		if out := encodeCleanCheckpoint(c); string(out) != string(b) {
			t.Fatalf("decoded %q, encodes as %q", b, out)
		}
	})
}

// TestCleanLeavesUnchangedSegments: a cleaning rewrites only the segments
// it changes. After a first cleaning, new writes update one key; the next
// cleaning rewrites the segment holding that key's old record and the new
// ones, leaves the other files as they are (same inode), and the log holds
// what the model says.
func TestCleanLeavesUnchangedSegments(t *testing.T) {
	h := randomHistory(47, 1500, 300, false)
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	h.write(t, l)
	if _, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture}); err != nil {
		t.Fatal(err)
	}
	before := map[int64]os.FileInfo{}
	for _, b := range l.Segments()[:len(l.Segments())-1] {
		fi, err := os.Stat(segmentPath(cfg.Dir, b, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		before[b] = fi
	}
	ts := h.endTS() + 1
	for range 30 {
		recs := []kv{{key: []byte("k7"), value: []byte("hot")}}
		appendRolling(t, l, keyedBatch(ts, recs...))
		h.batches = append(h.batches, recs)
		ts++
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d segments cleaned before; second cleaning %+v", len(before), res)
	var kept int
	for b, fi := range before {
		now, err := os.Stat(segmentPath(cfg.Dir, b, logSuffix))
		if err == nil && os.SameFile(fi, now) {
			kept++
		}
	}
	if kept < len(before)-2 || res.Segments > len(before)-kept+2 {
		t.Fatalf("%d of %d cleaned segments left as they were, %d rewritten: want all but the one holding k7's old record", kept, len(before), res.Segments)
	}
	checkRecords(t, logRecords(t, l), h.model(math.MinInt64))
	l.Close()
	checkRecords(t, logRecords(t, openLog(t, cfg)), h.model(math.MinInt64))
}
