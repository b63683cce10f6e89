package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

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
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 512)
	ts := int64(1_700_000_000_000)
	for l.Size() < 32<<20 {
		recs := make([]kv, 10)
		for i := range recs {
			recs[i] = kv{key: fmt.Appendf(nil, "key-%05d", rng.IntN(10000)), value: val}
		}
		appendRolling(b, l, keyedBatch(ts, recs...))
		ts += 10
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
