package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchKeyedBatches returns the cleaning benchmarks' batches one after
// another: 10 records each, keys drawn from 10,000 by a fixed seed,
// 512-byte values, timestamps 10 ms apart; every call of
// benchKeyedBatches starts the same sequence again.
func benchKeyedBatches() func() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 512)
	ts := int64(1_700_000_000_000)
	return func() []byte {
		recs := make([]kv, 10)
		for i := range recs {
			recs[i] = kv{key: fmt.Appendf(nil, "key-%05d", rng.IntN(10000)), value: val}
		}
		bt := keyedBatch(ts, recs...)
		ts += 10
		return bt
	}
}

// BenchmarkClean measures cleaner throughput: MB/s of segment bytes
// rewritten (the size of the closed segments before cleaning, per second of
// Clean). The log is 32 MiB in 1 MiB segments of 10-record batches with
// 512-byte values over 10,000 keys, so about 2 % of the records survive;
// one pass (the default key map holds every key) and, in the small-map
// case, a 256 KiB map that forces several passes.
func BenchmarkClean(b *testing.B) {
	tmpl := filepath.Join(b.TempDir(), "template")
	cfg := Config{Dir: tmpl, SegmentBytes: 1 << 20, Compacted: true, Logger: testLogger(b)}
	l := openLog(b, cfg)
	next := benchKeyedBatches()
	for l.Size() < 32<<20 {
		appendRolling(b, l, next())
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	upTo := l.NextOffset()
	l.Close()
	for _, c := range []struct {
		name     string
		mapBytes int64
	}{{"one-pass", 0}, {"small-map", 256 << 10}} {
		b.Run(c.name, func(b *testing.B) {
			var passes int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "run")
				copyDir(b, tmpl, dir)
				l, err := Open(context.Background(), Config{Dir: dir, SegmentBytes: 1 << 20, Compacted: true})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := l.Clean(context.Background(), CleanParams{UpTo: upTo, Now: 1 << 50, MaxMapBytes: c.mapBytes})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(res.BytesBefore)
				passes = res.Passes
				l.Close()
			}
			b.ReportMetric(float64(passes), "passes")
		})
	}
}

// BenchmarkRecut measures a follower's re-cut when compaction is turned on
// for a delete topic: MB/s of segment bytes rewritten. The log is 32 MiB
// of 10-record batches with 512-byte values, rolled at 1.5 MiB, re-cut at
// the boundaries of a copy rolled at 1 MiB (so every segment is rewritten);
// "already-cut" re-cuts the 1 MiB copy itself, which checks the
// boundaries and writes nothing.
func BenchmarkRecut(b *testing.B) {
	next := benchKeyedBatches()
	var batches [][]byte
	for size := 0; size < 32<<20; {
		batches = append(batches, next())
		size += len(batches[len(batches)-1])
	}
	write := func(dir string, segBytes int64) {
		l := openLog(b, Config{Dir: dir, SegmentBytes: segBytes, Logger: testLogger(b)})
		for _, bt := range batches {
			if _, _, err := l.Append(bt, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	ref, tmpl := filepath.Join(b.TempDir(), "ref"), filepath.Join(b.TempDir(), "template")
	write(ref, 1<<20)
	write(tmpl, 3<<19)
	lr := openLog(b, Config{Dir: ref, SegmentBytes: 1 << 20, Compacted: true})
	bases, err := lr.Boundaries(0, lr.ClosedEnd())
	if err != nil {
		b.Fatal(err)
	}
	lr.Close()
	for _, c := range []struct {
		name string
		src  string
	}{{"follower", tmpl}, {"already-cut", ref}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "run")
				copyDir(b, c.src, dir)
				l, err := Open(context.Background(), Config{Dir: dir, SegmentBytes: 1 << 20, Compacted: true})
				if err != nil {
					b.Fatal(err)
				}
				size := l.Size()
				b.StartTimer()
				res, err := l.Recut(context.Background(), bases, 0)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(size)
				b.ReportMetric(float64(res.Segments), "segments")
				l.Close()
			}
		})
	}
}

// BenchmarkCleanAgain measures a cleaning after new writes, the cleaner's
// usual work: a 32 MiB log (BenchmarkClean's batches, 1 MiB segments)
// whose first 29 MiB were cleaned, cleaned again up to its end. MB/s is
// of the segment bytes cleaned (BytesBefore). "dirty-map" cleans in the
// same open log, which maps keys from where the last cleaning ended;
// "reopened" reopens the log first, which maps from there too (the
// cleaner's checkpoint); "full-map" reopens it without its checkpoint, so
// the map starts at the first segment (as every cleaning after a restart
// did before the checkpoint). "hot-keys" is "dirty-map" with the last
// 3 MiB updating only 5 keys, so most cleaned segments are left as they
// are.
func BenchmarkCleanAgain(b *testing.B) {
	for _, c := range []struct {
		name           string
		reopen, dropCk bool
		hot            bool
	}{{"dirty-map", false, false, false}, {"reopened", true, false, false}, {"full-map", true, true, false}, {"hot-keys", false, false, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.StopTimer()
			tmpl := filepath.Join(b.TempDir(), "template")
			l := openLog(b, Config{Dir: tmpl, SegmentBytes: 1 << 20, Compacted: true, Logger: testLogger(b)})
			next := benchKeyedBatches()
			hot := 0
			val := make([]byte, 512)
			var upTo1 int64
			for l.Size() < 32<<20 {
				bt := next()
				if upTo1 > 0 && c.hot {
					recs := make([]kv, 10)
					for i := range recs {
						recs[i] = kv{key: fmt.Appendf(nil, "key-%05d", hot%5), value: val}
						hot++
					}
					bt = keyedBatch(1_800_000_000_000+int64(hot), recs...)
				}
				appendRolling(b, l, bt)
				if upTo1 == 0 && l.Size() >= 29<<20 {
					if err := l.Roll(); err != nil {
						b.Fatal(err)
					}
					upTo1 = l.NextOffset()
				}
			}
			if err := l.Roll(); err != nil {
				b.Fatal(err)
			}
			upTo2 := l.NextOffset()
			l.Close()
			var read, written int64
			var segsRewritten int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "run")
				copyDir(b, tmpl, dir)
				cfg := Config{Dir: dir, SegmentBytes: 1 << 20, Compacted: true}
				l, err := Open(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Clean(context.Background(), CleanParams{UpTo: upTo1, Now: 1 << 50}); err != nil {
					b.Fatal(err)
				}
				if c.reopen {
					l.Close()
					if c.dropCk {
						os.Remove(filepath.Join(dir, cleanCheckpointName))
					}
					if l, err = Open(context.Background(), cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				res, err := l.Clean(context.Background(), CleanParams{UpTo: upTo2, Now: 1 << 50})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(res.BytesBefore)
				read, written, segsRewritten = res.BytesRead, res.BytesWritten, res.Segments+res.SegmentsRemoved
				l.Close()
			}
			b.ReportMetric(float64(read)/(1<<20), "MiB-read")
			b.ReportMetric(float64(written)/(1<<20), "MiB-written")
			b.ReportMetric(float64(segsRewritten), "segments-rewritten")
		})
	}
}
