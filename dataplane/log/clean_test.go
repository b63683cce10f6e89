package log

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func cleanConfig(t testing.TB, dir string) Config {
	return Config{Dir: dir, SegmentBytes: 16 << 10, IndexIntervalBytes: 512, Logger: testLogger(t), Compacted: true}
}

// farFuture is a Now after every test history: every closed segment is
// past any compaction lag. Histories used with it have no tombstones.
const farFuture = 1 << 50

func checkRecords(t *testing.T, got, want []gotRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("log holds %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestCleanKeepsNewestPerKey writes many updates per key, with keyless
// records among them, and checks that after cleaning the log holds the
// newest record of every key and every keyless one, in order, with their
// original offsets and timestamps; that reads at every offset, gaps
// included, return the next surviving batch; and that a reopened log
// serves the same.
func TestCleanKeepsNewestPerKey(t *testing.T) {
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	h := randomHistory(1, 3000, 40, false)
	h.write(t, l)
	before := l.Size()
	next := l.NextOffset()
	res, err := l.Clean(context.Background(), CleanParams{UpTo: next, Now: farFuture})
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	t.Logf("%+v", res)
	if res.End != next || res.RecordsRemoved == 0 || res.Passes != 1 {
		t.Fatalf("clean result %+v, want End %d and records removed in one pass", res, next)
	}
	want := h.model(math.MinInt64)
	checkRecords(t, logRecords(t, l), want)
	if l.Size() >= before/4 {
		t.Fatalf("log is %d bytes after cleaning, was %d", l.Size(), before)
	}
	if l.NextOffset() != next || l.LogStartOffset() != 0 {
		t.Fatalf("offsets moved: start %d next %d, want 0 and %d", l.LogStartOffset(), l.NextOffset(), next)
	}
	checkGapReads(t, l, want)
	l.Close()
	l2 := openLog(t, cfg)
	if l2.Recovery().Cut() {
		t.Fatalf("reopen cut the compacted log: %+v", l2.Recovery())
	}
	checkRecords(t, logRecords(t, l2), want)
	checkGapReads(t, l2, want)
	// A second cleaning with the same parameters changes nothing.
	sums := dirSums(t, cfg.Dir)
	if _, err := l2.Clean(context.Background(), CleanParams{UpTo: next, Now: farFuture}); err != nil {
		t.Fatalf("clean again: %v", err)
	}
	if !reflect.DeepEqual(sums, dirSums(t, cfg.Dir)) {
		t.Fatalf("cleaning a clean log changed its files")
	}
}

// checkGapReads reads at every offset of the log and checks that Read,
// ReadBatch, BatchMaxTimestamp and BytesBetween land on the batch holding
// the first surviving record at or after it.
func checkGapReads(t *testing.T, l *Log, want []gotRecord) {
	t.Helper()
	j := 0
	for off := int64(0); off < l.NextOffset(); off++ {
		for j < len(want) && want[j].offset < off {
			j++
		}
		sl, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := sl.AppendTo(nil)
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		if j == len(want) {
			if len(b) != 0 {
				t.Fatalf("read %d past the last record returned %d bytes", off, len(b))
			}
			continue
		}
		// Like Kafka, a read returns the batch whose offset range holds
		// off (the reader skips records below off) or, in a gap, the next
		// batch; either way nothing surviving is skipped.
		h, _ := ParseHeader(b)
		if h.LastOffset() < off || h.BaseOffset > want[j].offset {
			t.Fatalf("read %d returned batch %d..%d, next surviving record is %d", off, h.BaseOffset, h.LastOffset(), want[j].offset)
		}
		var from []gotRecord
		for _, r := range decodeRecords(t, b) {
			if r.offset >= off {
				from = append(from, r)
			}
		}
		if len(from) > 0 && from[0] != want[j] {
			t.Fatalf("read %d: first record at or after it is %+v, want %+v", off, from[0], want[j])
		}
		if len(from) == 0 && h.NextOffset() > want[j].offset {
			t.Fatalf("read %d: batch %d..%d skips record %d", off, h.BaseOffset, h.LastOffset(), want[j].offset)
		}
		hb, _, err := l.ReadBatch(off, nil)
		if err != nil || hb.BaseOffset != sl.BaseOffset {
			t.Fatalf("read batch %d: base %d, %v; read gave base %d", off, hb.BaseOffset, err, sl.BaseOffset)
		}
		if _, err := l.BatchMaxTimestamp(off); err != nil && j < len(want) {
			t.Fatalf("batch max timestamp %d: %v", off, err)
		}
		if _, err := l.BytesBetween(off, l.NextOffset()); err != nil {
			t.Fatalf("bytes between %d and the end: %v", off, err)
		}
	}
}

// TestCleanTombstones checks that a tombstone removes the older values of
// its key at once, stays while its batch is younger than
// delete.retention.ms before Now, and goes after.
func TestCleanTombstones(t *testing.T) {
	const retention = time.Hour
	for _, tc := range []struct {
		name string
		age  time.Duration // Now minus the tombstone batch's max timestamp
		kept bool
	}{
		{"young", retention - time.Millisecond, true},
		{"at the limit", retention, true},
		{"expired", retention + time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cleanConfig(t, t.TempDir())
			l := openLog(t, cfg)
			h := randomHistory(2, 2000, 30, true)
			h.write(t, l)
			var lastTS int64
			for _, r := range h.model(math.MinInt64) {
				lastTS = max(lastTS, r.ts)
			}
			// Make one tombstone the newest record of k-gone, in its own batch.
			tombTS := lastTS + 10
			if _, _, err := l.Append(keyedBatch(tombTS, kv{key: []byte("k-gone"), value: []byte("v")}), 1); err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.Append(keyedBatch(tombTS, kv{key: []byte("k-gone")}), 1); err != nil {
				t.Fatal(err)
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			now := tombTS + tc.age.Milliseconds()
			if _, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: now, DeleteRetention: retention}); err != nil {
				t.Fatal(err)
			}
			got := logRecords(t, l)
			var gone []gotRecord
			for _, r := range got {
				if r.key == "k-gone" {
					gone = append(gone, r)
				}
			}
			if tc.kept && (len(gone) != 1 || !gone[0].tombstone) {
				t.Fatalf("want the tombstone of k-gone alone, got %+v", gone)
			}
			if !tc.kept && len(gone) != 0 {
				t.Fatalf("want k-gone gone, got %+v", gone)
			}
			// The other tombstones are far older than the retention.
			var rest []gotRecord
			for _, r := range got {
				if r.key != "k-gone" {
					rest = append(rest, r)
				}
			}
			checkRecords(t, rest, h.model(now-retention.Milliseconds()))
		})
	}
}

// TestCleanDeterministic cleans two byte-identical copies of a log
// separately, with different key map budgets (so different pass counts)
// and rate limits, and checks that every segment file comes out
// byte-identical (SHA-256 compared).
func TestCleanDeterministic(t *testing.T) {
	a := cleanConfig(t, filepath.Join(t.TempDir(), "a"))
	l := openLog(t, a)
	h := randomHistory(3, 4000, 500, true)
	h.write(t, l)
	next := l.NextOffset()
	l.Close()
	b := cleanConfig(t, filepath.Join(t.TempDir(), "b"))
	copyDir(t, a.Dir, b.Dir)
	if !reflect.DeepEqual(dirSums(t, a.Dir), dirSums(t, b.Dir)) {
		t.Fatal("copies differ before cleaning")
	}
	// Half the tombstones expire.
	p := CleanParams{UpTo: next, Now: h.endTS() + 1, DeleteRetention: time.Duration(h.endTS()-h.ts0) * time.Millisecond / 2}
	la := openLog(t, a)
	ra, err := la.Clean(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	p.MaxMapBytes, p.BytesPerSecond = 8<<10, 64<<20
	lb := openLog(t, b)
	rb, err := lb.Clean(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a: %+v\nb: %+v", ra, rb)
	if rb.Passes < 3 || ra.Passes != 1 {
		t.Fatalf("passes: %d and %d, want 1 and at least 3", ra.Passes, rb.Passes)
	}
	sa, sb := dirSums(t, a.Dir), dirSums(t, b.Dir)
	if !reflect.DeepEqual(sa, sb) {
		for _, n := range sortedKeys(sa) {
			t.Logf("%s %s %s", n, sa[n], sb[n])
		}
		t.Fatal("cleaned copies differ")
	}
	checkRecords(t, logRecords(t, la), h.model(p.Now-p.DeleteRetention.Milliseconds()))
}

// TestCleanPassesEqualSinglePass bounds the key map so that cleaning takes
// many passes and checks the result against one unbounded pass over the
// same log written with a different segment size: the batches served are
// the same bytes.
func TestCleanPassesEqualSinglePass(t *testing.T) {
	h := randomHistory(4, 3000, 800, true)
	p := CleanParams{Now: h.endTS() + 1, DeleteRetention: time.Duration(h.endTS()-h.ts0) * time.Millisecond / 2}
	var served [2][]byte
	for i, c := range []struct {
		segBytes int64
		mapBytes int64
	}{{16 << 10, 4 << 10}, {48 << 10, 0}} {
		cfg := cleanConfig(t, t.TempDir())
		cfg.SegmentBytes = c.segBytes
		l := openLog(t, cfg)
		h.write(t, l)
		p.UpTo, p.MaxMapBytes = l.NextOffset(), c.mapBytes
		res, err := l.Clean(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("segment bytes %d, map bytes %d: %+v", c.segBytes, c.mapBytes, res)
		if (c.mapBytes != 0) != (res.Passes > 5) {
			t.Fatalf("%d passes with map bytes %d", res.Passes, c.mapBytes)
		}
		served[i] = readAll(t, l, 0)
	}
	if string(served[0]) != string(served[1]) {
		t.Fatal("multi-pass and single-pass cleaning serve different batches")
	}
}

// TestCleanBounds checks that the active segment, segments reaching past
// UpTo, and segments younger than min.compaction.lag.ms are left alone.
func TestCleanBounds(t *testing.T) {
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	h := randomHistory(5, 2000, 20, false)
	h.write(t, l)
	// An active segment with updates of the same keys.
	if _, _, err := l.Append(keyedBatch(h.ts0+100000, kv{key: []byte("k1"), value: []byte("x")}, kv{key: []byte("k1"), value: []byte("y")}), 1); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) < 6 {
		t.Fatalf("only %d segments", len(segs))
	}
	sumsBefore := dirSums(t, cfg.Dir)
	// UpTo inside segment 4: segments 0..2 lie wholly below it.
	upTo := segs[3] + 1
	res, err := l.Clean(context.Background(), CleanParams{UpTo: upTo, Now: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != segs[3] {
		t.Fatalf("end %d, want %d", res.End, segs[3])
	}
	after := dirSums(t, cfg.Dir)
	for _, n := range sortedKeys(sumsBefore) {
		base, _ := ParseSegmentFileName(n)
		if base >= segs[3] && after[n] != sumsBefore[n] {
			t.Fatalf("segment %s at or past UpTo changed", n)
		}
	}
	// The lag keeps out every segment from the first one with a batch
	// younger than Now minus the lag.
	res, err = l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: h.ts0 + 1000, MinCompactionLag: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != l.Segments()[0] || res.Segments != 0 {
		t.Fatalf("lag: %+v, want nothing cleaned", res)
	}
	res, err = l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	active := l.Segments()[len(l.Segments())-1]
	if res.End != active {
		t.Fatalf("end %d, want the active segment's base %d", res.End, active)
	}
	recs := logRecords(t, l)
	if n := len(recs); recs[n-1].value != "y" || recs[n-2].value != "x" {
		t.Fatalf("active segment changed: %+v", recs[n-2:])
	}
}

// TestCleanConflict changes the log while a cleaning runs and checks that
// nothing is swapped and no file of the cleaning is left.
func TestCleanConflict(t *testing.T) {
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	randomHistory(6, 1500, 20, false).write(t, l)
	segs := l.Segments()
	cleanHook = func(step string) {
		if step == "passes done" {
			if err := l.DeleteHead(segs[1]); err != nil {
				t.Errorf("delete head: %v", err)
			}
		}
	}
	defer func() { cleanHook = nil }()
	sums := dirSums(t, cfg.Dir)
	_, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture})
	if !errors.Is(err, ErrCleanConflict) {
		t.Fatalf("clean: %v, want ErrCleanConflict", err)
	}
	delete(sums, SegmentFileName(segs[0]))
	if !reflect.DeepEqual(sums, dirSums(t, cfg.Dir)) {
		t.Fatal("segment files changed")
	}
	names, _ := os.ReadDir(cfg.Dir)
	for _, n := range names {
		if strings.HasSuffix(n.Name(), cleanedSuffix) || n.Name() == cleanSwapName {
			t.Fatalf("left %s behind", n.Name())
		}
	}
}

// TestCleanRateLimit checks that BytesPerSecond bounds the cleaner's I/O:
// a token bucket that starts full with one second of bytes cannot let
// R+W bytes through in less than (R+W-rate)/rate seconds.
func TestCleanRateLimit(t *testing.T) {
	cfg := cleanConfig(t, t.TempDir())
	l := openLog(t, cfg)
	randomHistory(8, 600, 30, false).write(t, l)
	const rate = 200 << 10
	start := time.Now()
	res, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture, BytesPerSecond: rate})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	total := res.BytesRead + res.BytesWritten
	floor := time.Duration(float64(total-rate) / rate * float64(time.Second))
	t.Logf("%d bytes read and written in %s at %d B/s (floor %s)", total, took, rate, floor)
	if total <= 2*rate {
		t.Fatalf("only %d bytes of I/O: too few to test the limit", total)
	}
	if took < floor {
		t.Fatalf("cleaning took %s, the rate allows no less than %s", took, floor)
	}
}

// TestCleanDirtyMapSameBytes: a log cleaned before maps keys only from the
// end of that cleaning, and writes the same bytes as a copy reopened
// without its checkpoint (which maps from the start), after new batches
// with tombstones and after a cleaning that only time calls for
// (tombstones expiring, nothing new written); a truncation makes it map
// from the start again.
func TestCleanDirtyMapSameBytes(t *testing.T) {
	h := randomHistory(21, 1200, 200, true)
	first, rest := history{batches: h.batches[:800], ts0: h.ts0}, h.batches[800:]
	a := cleanConfig(t, filepath.Join(t.TempDir(), "a"))
	la := openLog(t, a)
	first.write(t, la)
	span := time.Duration(h.endTS()-h.ts0) * time.Millisecond
	p := CleanParams{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span}
	if _, err := la.Clean(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ts := first.endTS() + 1
	for _, recs := range rest {
		appendRolling(t, la, keyedBatch(ts, recs...))
		ts += int64(len(recs))
	}
	if err := la.Roll(); err != nil {
		t.Fatal(err)
	}
	b := cleanConfig(t, filepath.Join(t.TempDir(), "b"))
	for i, q := range []CleanParams{
		{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span / 2},
		{UpTo: la.NextOffset(), Now: h.endTS() + 1, DeleteRetention: span / 4},
	} {
		copyDir(t, a.Dir, b.Dir)
		os.Remove(filepath.Join(b.Dir, cleanCheckpointName)) // as before the checkpoint was kept
		lb := openLog(t, b)
		ra, err := la.Clean(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := lb.Clean(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		lb.Close()
		t.Logf("cleaning %d: in place %+v\nreopened %+v", i, ra, rb)
		if ra.MappedFrom <= rb.MappedFrom || ra.BytesRead >= rb.BytesRead {
			t.Fatalf("cleaning %d: mapped from %d (read %d bytes) in place, %d (read %d) reopened: want the dirty map to start later and read less",
				i, ra.MappedFrom, ra.BytesRead, rb.MappedFrom, rb.BytesRead)
		}
		if sa, sb := dirSums(t, a.Dir), dirSums(t, b.Dir); !reflect.DeepEqual(sa, sb) {
			t.Fatalf("cleaning %d: the in-place and the reopened cleanings differ", i)
		}
		os.RemoveAll(b.Dir)
	}
	checkRecords(t, logRecords(t, la), h.model(h.endTS()+1-(span/4).Milliseconds()))
	// After a truncation the map starts at the first segment again.
	last := la.NextOffset()
	hb, _, err := la.ReadBatch(last-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.TruncateTo(hb.BaseOffset); err != nil {
		t.Fatal(err)
	}
	res, err := la.Clean(context.Background(), CleanParams{UpTo: la.ClosedEnd(), Now: h.endTS() + 1, DeleteRetention: span / 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.MappedFrom != la.Segments()[0] {
		t.Fatalf("after a truncation the map started at %d, want the first segment %d", res.MappedFrom, la.Segments()[0])
	}
}

// TestCleanBoundTombstones: with BoundTombstones, an expired tombstone at
// or above TombstonesBelow stays (the older records it hides still go),
// one below it goes.
func TestCleanBoundTombstones(t *testing.T) {
	l := openLog(t, cleanConfig(t, t.TempDir()))
	h := randomHistory(31, 600, 300, true)
	h.write(t, l)
	var tombs []int64 // the newest records that are tombstones
	for _, r := range h.model(math.MinInt64) {
		if r.tombstone {
			tombs = append(tombs, r.offset)
		}
	}
	if len(tombs) < 2 {
		t.Fatalf("the history has %d newest tombstones, want several", len(tombs))
	}
	bound := tombs[len(tombs)/2]
	p := CleanParams{UpTo: l.NextOffset(), Now: farFuture, BoundTombstones: true, TombstonesBelow: bound}
	if _, err := l.Clean(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var want []gotRecord
	for _, r := range h.model(math.MinInt64) {
		if !r.tombstone || r.offset >= bound {
			want = append(want, r)
		}
	}
	got := logRecords(t, l)
	checkRecords(t, got, want)
	kept := 0
	for _, r := range got {
		if r.tombstone {
			kept++
		}
	}
	if kept == 0 || len(want) == len(h.model(math.MinInt64)) {
		t.Fatalf("%d tombstones kept of the newest records; want some kept above %d and some gone below it", kept, bound)
	}
}
