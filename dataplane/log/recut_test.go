package log

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// switchedLog writes h to a log that is not compacted, rolling by its own
// segment size (as a delete topic's replica rolls by its own clock),
// moves its log start to logStart as retention would, rolls, and then
// turns compaction on.
func switchedLog(t testing.TB, dir string, segBytes, logStart int64, h history) *Log {
	t.Helper()
	cfg := cleanConfig(t, dir)
	cfg.Compacted, cfg.SegmentBytes = false, segBytes
	l := openLog(t, cfg)
	ts := h.ts0
	for _, recs := range h.batches {
		if _, _, err := l.Append(keyedBatch(ts, recs...), 1); err != nil {
			t.Fatal(err)
		}
		ts += int64(len(recs))
	}
	if err := l.DeleteHead(logStart); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	s := l.Settings()
	s.Compacted = true
	if err := l.Reconfigure(s); err != nil {
		t.Fatal(err)
	}
	return l
}

// newestPerKey is what cleaning with no tombstone expiry must leave of
// recs: the newest record of every key and every keyless one.
func newestPerKey(recs []gotRecord) []gotRecord {
	newest := map[string]int64{}
	for _, r := range recs {
		if r.keyed {
			newest[r.key] = r.offset
		}
	}
	var out []gotRecord
	for _, r := range recs {
		if !r.keyed || newest[r.key] == r.offset {
			out = append(out, r)
		}
	}
	return out
}

// TestRecutIdenticalReplicas writes the same batches to two logs that
// roll at different sizes and whose retention left different first
// segments, turns compaction on, re-cuts both at the first log's
// boundaries and checks that their segment files are byte-identical
// (SHA-256), before and after cleaning with the same parameters; that the
// re-cut serves the same records from the log start; that a second re-cut
// does nothing, also after cleaning; and that a reopened log matches.
func TestRecutIdenticalReplicas(t *testing.T) {
	h := randomHistory(11, 1500, 300, true)
	a := switchedLog(t, filepath.Join(t.TempDir(), "a"), 16<<10, 1234, h)
	b := switchedLog(t, filepath.Join(t.TempDir(), "b"), 40<<10, 1234, h)
	if reflect.DeepEqual(dirSums(t, a.cfg.Dir), dirSums(t, b.cfg.Dir)) {
		t.Fatal("the two logs have the same segments before the re-cut")
	}
	before := logRecords(t, a)
	bases, err := a.Boundaries(a.LogStartOffset(), a.ClosedEnd())
	if err != nil || len(bases) < 3 {
		t.Fatalf("boundaries %v, %v", bases, err)
	}
	if bases[0] > 1234 || bases[len(bases)-1] != a.ClosedEnd() {
		t.Fatalf("boundaries %v: want the batch holding 1234 first and %d last", bases, a.ClosedEnd())
	}
	for name, l := range map[string]*Log{"a": a, "b": b} {
		res, err := l.Recut(context.Background(), bases, 64<<20)
		if err != nil {
			t.Fatalf("recut %s: %v", name, err)
		}
		t.Logf("recut %s: %+v", name, res)
		if l.LogStartOffset() != 1234 {
			t.Fatalf("%s: log start %d after the re-cut, want 1234", name, l.LogStartOffset())
		}
	}
	sameSums := func(what string) {
		t.Helper()
		sa, sb := dirSums(t, a.cfg.Dir), dirSums(t, b.cfg.Dir)
		if !reflect.DeepEqual(sa, sb) {
			for _, n := range sortedKeys(sa) {
				t.Logf("%s a %s b %s", n, sa[n], sb[n])
			}
			t.Logf("b: %v", sortedKeys(sb))
			t.Fatalf("%s: segment files differ", what)
		}
	}
	sameSums("after the re-cut")
	checkRecords(t, logRecords(t, b), before)
	checkRecords(t, logRecords(t, a), before)
	p := CleanParams{UpTo: a.ClosedEnd(), Now: h.endTS() + 1, DeleteRetention: 1000 * time.Hour}
	for name, l := range map[string]*Log{"a": a, "b": b} {
		if _, err := l.Clean(context.Background(), p); err != nil {
			t.Fatalf("clean %s: %v", name, err)
		}
	}
	sameSums("after cleaning")
	var keptFrom []gotRecord
	for _, r := range before {
		if r.offset >= bases[0] {
			keptFrom = append(keptFrom, r)
		}
	}
	checkRecords(t, logRecords(t, b), newestPerKey(keptFrom))
	for name, l := range map[string]*Log{"a": a, "b": b} {
		res, err := l.Recut(context.Background(), bases, 0)
		if err != nil || res.Segments != 0 {
			t.Fatalf("second recut of %s: %+v, %v; want nothing done", name, res, err)
		}
	}
	cfg := b.cfg
	b.Close()
	b = openLog(t, cfg)
	sameSums("after reopening")
	checkRecords(t, logRecords(t, b), newestPerKey(keptFrom))
}

// TestRecutNotReady checks that a log with no segment at the last
// boundary is not re-cut.
func TestRecutNotReady(t *testing.T) {
	h := randomHistory(12, 300, 50, false)
	a := switchedLog(t, filepath.Join(t.TempDir(), "a"), 8<<10, 0, h)
	bases, err := a.Boundaries(0, a.ClosedEnd())
	if err != nil {
		t.Fatal(err)
	}
	bases[len(bases)-1]++
	if _, err := a.Recut(context.Background(), bases, 0); !errors.Is(err, ErrRecutNotReady) {
		t.Fatalf("recut without a segment at the last boundary: %v, want ErrRecutNotReady", err)
	}
}

const recutCrashBasesEnv = "SLUICE_RECUT_CRASH_BASES"

// TestRecutCrash re-cuts in a child process that exits at its n-th step,
// for every n (after writing the new files, before and after the swap list
// is committed, after each swapped segment), and, when the list was
// committed, a second child exits while reopening. The parent then
// reopens the log and checks that it holds exactly the old segment files
// or exactly the re-cut ones (SHA-256), that a re-cut from the old ones
// gives the re-cut ones, and that no file of the re-cut is left.
func TestRecutCrash(t *testing.T) {
	if dir := os.Getenv(cleanCrashDirEnv); dir != "" {
		recutCrashChild(dir)
		return
	}
	h := randomHistory(13, 400, 60, true)
	ref := switchedLog(t, filepath.Join(t.TempDir(), "ref"), 12<<10, 500, h)
	bases, err := ref.Boundaries(ref.LogStartOffset(), ref.ClosedEnd())
	if err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(t.TempDir(), "template")
	l := switchedLog(t, tmpl, 20<<10, 500, h)
	l.Close()
	oldSums := dirSums(t, tmpl)
	ref.Close()
	if _, err := openLog(t, ref.cfg).Recut(context.Background(), bases, 0); err != nil {
		t.Fatal(err)
	}
	newSums := dirSums(t, ref.cfg.Dir)
	if reflect.DeepEqual(oldSums, newSums) {
		t.Fatal("re-cut segments equal the old ones")
	}
	var enc []string
	for _, b := range bases {
		enc = append(enc, strconv.FormatInt(b, 10))
	}
	t.Setenv(recutCrashBasesEnv, strings.Join(enc, ","))
	crashAtEveryStep(t, "TestRecutCrash", "recut", tmpl, func(at int, dir string, l *Log) bool {
		switch got := dirSums(t, dir); {
		case reflect.DeepEqual(got, oldSums):
			if _, err := l.Recut(context.Background(), bases, 0); err != nil {
				t.Fatalf("crash at step %d: redo the re-cut: %v", at, err)
			}
			if !reflect.DeepEqual(dirSums(t, dir), newSums) {
				t.Fatalf("crash at step %d: the re-cut redone differs", at)
			}
			return true
		case reflect.DeepEqual(got, newSums):
			return false
		default:
			t.Fatalf("crash at step %d: segment files are neither the old nor the re-cut ones: %v", at, sortedKeys(got))
			return false
		}
	})
}

// recutCrashChild re-cuts (or, in mode reopen, opens) the log in dir and
// exits at the step its environment names.
func recutCrashChild(dir string) {
	var bases []int64
	for _, f := range strings.Split(os.Getenv(recutCrashBasesEnv), ",") {
		b, _ := strconv.ParseInt(f, 10, 64)
		bases = append(bases, b)
	}
	swapCrashChild(dir, "recut", func(l *Log) error {
		_, err := l.Recut(context.Background(), bases, 0)
		return err
	})
}
