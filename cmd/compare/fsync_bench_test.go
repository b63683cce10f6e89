package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasyncTail measures what one durability round costs on this
// disk when it is one fdatasync (NATS's fsync per message) and when it is
// two in parallel on two files (a Sluice Raft round: the segment and
// raft.entries), each after a small append: the round ends with the slower
// of the two. It reports the round's p50, p99 and p99.9.
//
//	go test -run '^$' -bench FdatasyncTail -benchtime 3000x ./cmd/compare/
func BenchmarkFdatasyncTail(b *testing.B) {
	for _, tc := range []struct {
		name  string
		files int
	}{{"one", 1}, {"two-parallel", 2}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			fs := make([]*os.File, tc.files)
			for i := range fs {
				f, err := os.OpenFile(filepath.Join(dir, string(rune('a'+i))), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				fs[i] = f
			}
			buf := make([]byte, 1100) // a 1 KiB record batch, or an entry record and its padding
			lat := make([]time.Duration, 0, b.N)
			errs := make([]error, len(fs))
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				var wg sync.WaitGroup
				for i, f := range fs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := f.Write(buf); err != nil {
							errs[i] = err
							return
						}
						errs[i] = unix.Fdatasync(int(f.Fd()))
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			s := summarize(lat)
			b.ReportMetric(float64(s.P50)/1e3, "p50-µs")
			b.ReportMetric(float64(s.P99)/1e3, "p99-µs")
			b.ReportMetric(float64(s.P999)/1e3, "p99.9-µs")
		})
	}
}
