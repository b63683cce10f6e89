package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// appendN appends n batches of recs records each, tagged by their expected
// base offset, and returns the batches as written.
func appendN(t testing.TB, l *Log, n, recs, valueSize int, ts int64) [][]byte {
	t.Helper()
	var out [][]byte
	for range n {
		next := l.NextOffset()
		b := makeBatch(recs, valueSize, ts, uint64(next))
		base, last, err := l.Append(b, 3)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		if base != next || last != next+int64(recs)-1 {
			t.Fatalf("append got [%d,%d], want base %d", base, last, next)
		}
		out = append(out, b)
	}
	return out
}

func TestAppendReadRoll(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 500
	l := openLog(t, cfg)
	written := appendN(t, l, 100, 3, 100, 1000)
	if n := len(l.Segments()); n < 5 {
		t.Fatalf("want several segments, got %d", n)
	}
	got := splitBatches(t, readAll(t, l, 0))
	if len(got) != len(written) {
		t.Fatalf("read %d batches, wrote %d", len(got), len(written))
	}
	for i := range got {
		if !sameBatch(got[i], written[i]) {
			t.Fatalf("batch %d differs", i)
		}
		h, _ := ParseHeader(got[i])
		if h.BaseOffset != int64(3*i) || h.LeaderEpoch != 3 {
			t.Fatalf("batch %d header %+v", i, h)
		}
	}
	// Mid-batch offset returns the containing batch.
	h, b, err := l.ReadBatch(10, nil)
	if err != nil || h.BaseOffset != 9 || !sameBatch(b, written[3]) {
		t.Fatalf("read batch 10: %+v %v", h, err)
	}
	// Byte limit 0 still gives one batch; the high bound stops the range.
	sl, err := l.Read(0, 0, math.MaxInt64)
	if err != nil || sl.NextOffset != 3 {
		t.Fatalf("read limit 0: %+v %v", sl, err)
	}
	sl.Release()
	sl, err = l.Read(0, 1<<20, 7)
	if err != nil || sl.NextOffset != 9 {
		t.Fatalf("read to hwm 7: %+v %v", sl, err)
	}
	sl.Release()
	sl, err = l.Read(9, 1<<20, 9)
	if err != nil || sl.Size != 0 {
		t.Fatalf("read at hwm: %+v %v", sl, err)
	}
	if _, err := l.Read(301, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past end: %v", err)
	}
	sl, err = l.Read(300, 100, math.MaxInt64)
	if err != nil || sl.Size != 0 {
		t.Fatalf("read at end: %+v %v", sl, err)
	}
	// Reopen: the same bytes, indexes loaded or rebuilt.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, cfg)
	if r := l.Recovery(); r.Cut() || len(r.RebuiltIndexes) != 0 || r.NextOffset != 300 {
		t.Fatalf("recovery %+v", r)
	}
	if got := splitBatches(t, readAll(t, l, 0)); len(got) != 100 || !sameBatch(got[99], written[99]) {
		t.Fatalf("after reopen: %d batches", len(got))
	}
}

func TestAppendRejects(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBatchBytes = 1000
	l := openLog(t, cfg)
	bad := makeBatch(2, 10, 0, 0)
	bad[len(bad)-1] ^= 0xff
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"corrupt", bad, ErrCorruptBatch},
		{"too large", makeBatch(2, 1000, 0, 0), ErrBatchTooLarge},
		{"magic", func() []byte { b := makeBatch(1, 1, 0, 0); b[offMagic] = 0; return b }(), ErrInvalidMagic},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := l.Append(tc.b, 0); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A bad batch in a group rejects the whole group.
	_, _, err := l.AppendBatches([]Batch{{Data: makeBatch(1, 1, 0, 0)}, {Data: bad}})
	if !errors.Is(err, ErrCorruptBatch) || l.NextOffset() != 0 {
		t.Fatalf("group: %v, next %d", err, l.NextOffset())
	}
}

func TestAppendBatchesAcrossRoll(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	l := openLog(t, cfg)
	var in []Batch
	for i := range 20 {
		in = append(in, Batch{Data: makeBatch(2, 100, 0, uint64(2*i)), LeaderEpoch: int32(i)})
	}
	first, last, err := l.AppendBatches(in)
	if err != nil || first != 0 || last != 39 {
		t.Fatalf("append batches: %d %d %v", first, last, err)
	}
	got := splitBatches(t, readAll(t, l, 0))
	for i, b := range got {
		h, _ := ParseHeader(b)
		if h.BaseOffset != int64(2*i) || h.LeaderEpoch != int32(i) || batchTag(t, b) != uint64(2*i) {
			t.Fatalf("batch %d: %+v", i, h)
		}
	}
	if len(l.Segments()) < 2 {
		t.Fatal("no roll")
	}
}

func TestTruncateTo(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 300
	l := openLog(t, cfg)
	written := appendN(t, l, 30, 2, 100, 0)
	segs := l.Segments()
	cases := []struct {
		name string
		to   int64
		want error
	}{
		{"mid batch", 5, ErrNotBatchBoundary},
		{"past end", 61, ErrOffsetOutOfRange},
		{"at end", 60, nil},
		{"within last segment", 58, nil},
		{"segment boundary", segs[len(segs)-2], nil},
		{"inside first segment", 4, nil},
		{"everything", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := l.TruncateTo(tc.to)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			if l.NextOffset() != tc.to || l.DurableOffset() > tc.to {
				t.Fatalf("next %d durable %d", l.NextOffset(), l.DurableOffset())
			}
			got := splitBatches(t, readAll(t, l, 0))
			if len(got) != int(tc.to/2) {
				t.Fatalf("%d batches left", len(got))
			}
			for i := range got {
				if !sameBatch(got[i], written[i]) {
					t.Fatalf("batch %d differs", i)
				}
			}
		})
	}
	// Appends continue from the cut, and survive a reopen.
	appendN(t, l, 10, 2, 100, 0)
	l.Close()
	l = openLog(t, cfg)
	if l.NextOffset() != 20 || l.Recovery().Cut() {
		t.Fatalf("reopen: next %d, %+v", l.NextOffset(), l.Recovery())
	}
}

func TestDeleteHeadAndRetention(t *testing.T) {
	now := time.UnixMilli(10_000_000_000)
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	cfg.RetentionAge = time.Hour
	cfg.Now = func() time.Time { return now }
	l := openLog(t, cfg)
	for i := range 30 {
		appendN(t, l, 1, 1, 100, now.UnixMilli()-2*time.Hour.Milliseconds()+int64(i)*time.Minute.Milliseconds())
	}
	segs := l.Segments()
	if err := l.DeleteHead(3); err != nil || l.LogStartOffset() != 3 {
		t.Fatalf("delete head: %v %d", err, l.LogStartOffset())
	}
	if _, err := l.Read(2, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if err := l.DeleteHead(31); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete head past end: %v", err)
	}
	if len(l.Segments()) != len(segs)-segmentsBelow(segs, 3) {
		t.Fatalf("segments %v after delete head 3 (was %v)", l.Segments(), segs)
	}
	// Timestamps run from 2h ago to 1h31m ago, so the first 1h of... all
	// batches older than 1 hour: everything but the active segment goes.
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if got := l.Segments(); len(got) != 1 || l.LogStartOffset() != got[0] {
		t.Fatalf("after retention: %v start %d", got, l.LogStartOffset())
	}
	l.Close()
	l = openLog(t, cfg)
	if got := l.Segments(); len(got) != 1 || l.LogStartOffset() != got[0] {
		t.Fatalf("after reopen: %v start %d", got, l.LogStartOffset())
	}

	// Segments a delete-head did not get to unlink go at the next open.
	cfg3 := testConfig(t)
	cfg3.SegmentBytes = 1000
	l3 := openLog(t, cfg3)
	appendN(t, l3, 30, 1, 100, 0)
	segs3 := l3.Segments()
	l3.Close()
	if err := os.WriteFile(filepath.Join(cfg3.Dir, checkpointName), []byte(fmt.Sprintf("v1 %d\n", segs3[2]+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	l3 = openLog(t, cfg3)
	if r := l3.Recovery(); len(r.RemovedBelowStart) != 2 || r.Cut() || l3.LogStartOffset() != segs3[2]+1 {
		t.Fatalf("recovery %+v, start %d", r, l3.LogStartOffset())
	}

	// Size retention keeps at least retention.bytes.
	cfg2 := testConfig(t)
	cfg2.SegmentBytes = 1000
	cfg2.RetentionAge = -1
	cfg2.RetentionBytes = 3000
	l2 := openLog(t, cfg2)
	appendN(t, l2, 40, 1, 100, 0)
	if _, err := l2.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if sz := l2.Size(); sz < 3000 || sz > 4000 {
		t.Fatalf("size after retention %d", sz)
	}
}

func segmentsBelow(segs []int64, start int64) int {
	n := 0
	for i := 0; i+1 < len(segs) && segs[i+1] <= start; i++ {
		n++
	}
	return n
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	l := openLog(t, cfg)
	// Batch i has timestamps 1000+10i .. 1000+10i+1, except batch 7 is older.
	for i := range 40 {
		ts := int64(1000 + 10*i)
		if i == 7 {
			ts = 10
		}
		appendN(t, l, 1, 2, 100, ts)
	}
	cases := []struct {
		ts    int64
		want  int64
		found bool
	}{
		{0, 0, true}, {1000, 0, true}, {1001, 0, true}, {1002, 2, true},
		{1075, 16, true}, {1391, 78, true}, {1392, 0, false},
	}
	check := func() {
		for _, tc := range cases {
			got, found, err := l.OffsetForTimestamp(tc.ts)
			if err != nil || found != tc.found || (found && got != tc.want) {
				t.Fatalf("ts %d: got %d %v %v, want %d %v", tc.ts, got, found, err, tc.want, tc.found)
			}
		}
	}
	check()
	l.Close()
	l = openLog(t, cfg)
	check()
	if err := l.DeleteHead(5); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := l.OffsetForTimestamp(0); got != 5 {
		t.Fatalf("after delete head: %d", got)
	}
}

func TestRecoveryCutsTornTail(t *testing.T) {
	cases := []struct {
		name string
		tear func(t *testing.T, path string, size int64)
	}{
		{"partial batch", func(t *testing.T, path string, size int64) { truncateFile(t, path, size-7) }},
		{"zeros appended", func(t *testing.T, path string, size int64) { appendFile(t, path, make([]byte, 4096)) }},
		{"flipped byte", func(t *testing.T, path string, size int64) { flipByte(t, path, size-3) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			l := openLog(t, cfg)
			written := appendN(t, l, 10, 2, 50, 0)
			l.Close()
			path := segmentPath(cfg.Dir, 0, logSuffix)
			fi, _ := os.Stat(path)
			tc.tear(t, path, fi.Size())
			l = openLog(t, cfg)
			r := l.Recovery()
			if !r.Cut() || r.Reason == "" {
				t.Fatalf("no cut reported: %+v", r)
			}
			got := splitBatches(t, readAll(t, l, 0))
			want := written
			if tc.name != "zeros appended" {
				want = written[:9]
			}
			if len(got) != len(want) {
				t.Fatalf("%d batches after recovery, want %d", len(got), len(want))
			}
			appendN(t, l, 1, 2, 50, 0)
		})
	}
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 200
	l := openLog(t, cfg)
	written := appendN(t, l, 50, 1, 100, 5000)
	segs := l.Segments()
	l.Close()
	os.Remove(segmentPath(cfg.Dir, segs[0], indexSuffix))
	os.WriteFile(segmentPath(cfg.Dir, segs[1], timeIndexSuffix), []byte("garbage"), 0o644)
	os.WriteFile(segmentPath(cfg.Dir, segs[2], indexSuffix), make([]byte, 64), 0o644)
	l = openLog(t, cfg)
	if r := l.Recovery(); len(r.RebuiltIndexes) != 3 || r.Cut() {
		t.Fatalf("recovery %+v", r)
	}
	got := splitBatches(t, readAll(t, l, 0))
	if len(got) != 50 || !sameBatch(got[49], written[49]) {
		t.Fatalf("%d batches", len(got))
	}
	if off, ok, _ := l.OffsetForTimestamp(5000); !ok || off != 0 {
		t.Fatalf("timestamp lookup %d %v", off, ok)
	}
}

func TestRecoveryMidLogCorruption(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	l := openLog(t, cfg)
	appendN(t, l, 30, 1, 100, 0)
	segs := l.Segments()
	l.Close()
	// A closed segment that lost its tail: everything after it goes too.
	p := segmentPath(cfg.Dir, segs[1], logSuffix)
	fi, _ := os.Stat(p)
	truncateFile(t, p, fi.Size()-10)
	l = openLog(t, cfg)
	r := l.Recovery()
	if r.CutSegment != segs[1] || len(r.DroppedSegments) != len(segs)-2 {
		t.Fatalf("recovery %+v", r)
	}
	if l.NextOffset() >= segs[2] {
		t.Fatalf("next offset %d", l.NextOffset())
	}
	splitBatches(t, readAll(t, l, 0))
}

func TestReadSurvivesSegmentDeletion(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	l := openLog(t, cfg)
	written := appendN(t, l, 30, 1, 100, 0)
	sl, err := l.Read(0, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	if err := l.DeleteHead(l.Segments()[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmentPath(cfg.Dir, 0, logSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 0 still there: %v", err)
	}
	b, err := sl.AppendTo(nil)
	if err != nil || !sameBatch(splitBatches(t, b)[0], written[0]) {
		t.Fatalf("read after delete: %v", err)
	}
	l.Close()
	var buf [10]byte
	if _, err := sl.ReadAt(buf[:], 0); err != nil {
		t.Fatalf("read after close: %v", err)
	}
}

func TestSliceSendfile(t *testing.T) {
	cfg := testConfig(t)
	l := openLog(t, cfg)
	written := appendN(t, l, 20, 4, 1000, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sl, err := l.Read(8, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	n, err := sl.WriteTo(c)
	sl.Release()
	c.Close()
	if err != nil || n != sl.Size {
		t.Fatalf("write to: %d %v", n, err)
	}
	var b []byte
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("receiver did not finish")
	}
	bs := splitBatches(t, b)
	if len(bs) != 18 || !sameBatch(bs[0], written[2]) {
		t.Fatalf("received %d batches", len(bs))
	}
	// The copy path gives the same bytes.
	sl, _ = l.Read(8, 1<<20, math.MaxInt64)
	defer sl.Release()
	var w writerOnly
	if _, err := sl.WriteTo(&w); err != nil || string(w.b) != string(b) {
		t.Fatalf("copy path differs: %v", err)
	}
}

type writerOnly struct{ b []byte }

func (w *writerOnly) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func TestOpenLocksDirectory(t *testing.T) {
	cfg := testConfig(t)
	openLog(t, cfg)
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("second open of the same directory succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Dir: "x"}, true},
		{"no dir", Config{}, false},
		{"segment too big", Config{Dir: "x", SegmentBytes: 1 << 40}, false},
		{"negative segment age", Config{Dir: "x", SegmentAge: -1}, false},
		{"huge batch", Config{Dir: "x", MaxBatchBytes: 1 << 31}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			if (err == nil) != tc.ok {
				t.Fatalf("validate: %v", err)
			}
			if tc.ok && (tc.cfg.SegmentBytes != DefaultSegmentBytes || tc.cfg.Logger == nil || tc.cfg.Now == nil) {
				t.Fatalf("defaults not filled: %+v", tc.cfg)
			}
		})
	}
}

func TestSegmentAgeRoll(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := testConfig(t)
	cfg.SegmentAge = time.Minute
	cfg.Now = func() time.Time { return now }
	l := openLog(t, cfg)
	appendN(t, l, 3, 1, 10, 0)
	now = now.Add(2 * time.Minute)
	appendN(t, l, 1, 1, 10, 0)
	if got := l.Segments(); len(got) != 2 || got[1] != 3 {
		t.Fatalf("segments %v", got)
	}
}

func TestSyncerModes(t *testing.T) {
	for _, mode := range []SyncMode{SyncFiles, SyncFilesystem} {
		t.Run(mode.String(), func(t *testing.T) {
			var logs []*Log
			for range 4 {
				cfg := testConfig(t)
				cfg.SegmentBytes = 1000
				logs = append(logs, openLog(t, cfg))
			}
			y := NewSyncer(mode)
			for round := range 3 {
				for _, l := range logs {
					appendN(t, l, 5, 1, 100, 0)
				}
				if err := y.Sync(logs...); err != nil {
					t.Fatal(err)
				}
				for _, l := range logs {
					if l.DurableOffset() != l.NextOffset() || l.NextOffset() != int64(5*(round+1)) {
						t.Fatalf("durable %d next %d", l.DurableOffset(), l.NextOffset())
					}
				}
			}
		})
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	f.ReadAt(b[:], pos)
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}
