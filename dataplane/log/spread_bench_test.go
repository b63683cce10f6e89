package log

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasyncSpread asks what the disk charges for spreading the
// same bytes over more files: each round appends 1,200 KiB and makes it
// durable, either to 1 file, or 100 KiB to each of 12 files, or 12 KiB to
// each of 100 files, their fdatasyncs in parallel (a group-commit round of
// that many busy partitions). The three shapes alternate round by round,
// so the machine's swings hit them alike; MB/s of each is reported, and
// the ratios to one file. A fourth shape makes the 100 files durable with
// one syncfs(2) instead of 100 fdatasyncs. Run with -benchtime 300x or so: every round
// appends, so the files grow by 1.2 MB per round and shape.
func BenchmarkFdatasyncSpread(b *testing.B) {
	const total = 1200 << 10
	// -100 is 100 files made durable by one syncfs(2) instead of 100
	// fdatasyncs (SyncFilesystem); the other shapes fdatasync every file.
	shapes := []int{1, 12, 100, -100}
	dir := b.TempDir()
	fds := map[int][]int{}
	for _, n := range shapes {
		for i := 0; i < abs(n); i++ {
			f, err := os.Create(fmt.Sprintf("%s/spread%d-%d", dir, n, i))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			fds[n] = append(fds[n], int(f.Fd()))
		}
	}
	offs := map[int]int64{}
	spent := map[int]time.Duration{}
	buf := make([]byte, total)
	round := func(n int) {
		chunk := buf[:total/abs(n)]
		start := time.Now()
		var wg sync.WaitGroup
		for _, fd := range fds[n] {
			wg.Go(func() {
				if _, err := unix.Pwrite(fd, chunk, offs[n]); err != nil {
					b.Error(err)
					return
				}
				if n < 0 {
					return
				}
				if err := unix.Fdatasync(fd); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if n < 0 {
			if err := unix.Syncfs(fds[n][0]); err != nil {
				b.Error(err)
			}
		}
		spent[n] += time.Since(start)
		offs[n] += int64(len(chunk)) // always appending, as a log does: 1.2 MB per round and shape on disk
	}
	b.SetBytes(total * int64(len(shapes)))
	for i := 0; b.Loop(); i++ {
		for k := range shapes {
			round(shapes[(i+k)%len(shapes)])
		}
	}
	mbps := func(n int) float64 { return float64(total) * float64(b.N) / spent[n].Seconds() / 1e6 }
	for _, n := range shapes[:3] {
		b.ReportMetric(mbps(n), fmt.Sprintf("MB/s-%dfiles", n))
	}
	b.ReportMetric(mbps(-100), "MB/s-100files-syncfs")
	b.ReportMetric(mbps(12)/mbps(1), "x-12/1")
	b.ReportMetric(mbps(100)/mbps(1), "x-100/1")
	b.ReportMetric(mbps(-100)/mbps(1), "x-100syncfs/1")
}

func abs(n int) int { return max(n, -n) }
