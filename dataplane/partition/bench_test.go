package partition_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// benchBatch is 64 records of 1 KiB: a 64 KiB produce.
func benchBatch(seq int) []byte {
	vals := make([][]byte, 64)
	for i := range vals {
		v := make([]byte, 1024)
		copy(v, fmt.Sprintf("%d-%d", seq, i))
		vals[i] = v
	}
	return celltest.Batch(vals...)
}

// produceTimed produces every batch, batch i to partition i%parts, from
// workers goroutines, each waiting up to a minute, and returns each
// produce's latency. A failed produce is reported and stops its worker.
func produceTimed(b *testing.B, c *celltest.Cell, workers, parts int, batches [][]byte) []time.Duration {
	lat := make([]time.Duration, len(batches))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := c.Produce(ctx, i%parts, batches[i])
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	return lat
}

// processWriteBytes is write_bytes from /proc/self/io: bytes this process
// caused to be sent to the block layer.
func processWriteBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func dirBytes(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// BenchmarkReplicatedProduce measures produces acknowledged after a
// majority fsync: three replicas in one process, 64 KiB batches of 1 KiB
// records, 16 producers in flight per partition.
func BenchmarkReplicatedProduce(b *testing.B) {
	for _, parts := range []int{1, 8} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			dir := b.TempDir()
			c := celltest.New(b, celltest.Options{Partitions: parts, Dir: dir, Raft: partition.DefaultRaftConfig, CheckInterval: time.Minute})
			for p := 0; p < parts; p++ {
				c.WaitLeader(p, time.Minute)
			}
			batches := make([][]byte, 0, b.N)
			for i := 0; i < b.N; i++ {
				batches = append(batches, benchBatch(i))
			}
			logical := int64(len(batches[0]))
			b.SetBytes(logical)
			const workers = 16
			size0, w0 := dirBytes(dir), processWriteBytes(b)
			b.ResetTimer()
			lat := produceTimed(b, c, workers*parts, parts, batches)
			b.StopTimer()
			// Let followers finish writing what the leaders committed, so
			// the byte count covers all three copies.
			for p := 0; p < parts; p++ {
				want := c.Replica(c.Leader(p), p).HighWatermark()
				celltest.WaitFor(b, time.Minute, "followers to catch up", func() bool {
					for br := 0; br < 3; br++ {
						if c.Replica(br, p).Store().Log().DurableOffset() < want {
							return false
						}
					}
					return true
				})
			}
			sort.Slice(lat, func(x, y int) bool { return lat[x] < lat[y] })
			total := logical * int64(b.N)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(dirBytes(dir)-size0)/float64(total), "file-bytes/logical-byte")
			if w1 := processWriteBytes(b); w0 >= 0 && w1 >= 0 {
				b.ReportMetric(float64(w1-w0)/float64(total), "io-write-bytes/logical-byte")
			}
		})
	}
}

// BenchmarkIdleCPU300 reports the CPU an idle cell of 300 partitions
// (900 replicas in this process, the production Raft timeouts) burns per
// second of wall time. The figure per broker is a third of it.
func BenchmarkIdleCPU300(b *testing.B) {
	const parts = 300
	c := celltest.New(b, celltest.Options{Partitions: parts, Raft: func() *raft.Config {
		cfg := partition.DefaultRaftConfig()
		return cfg
	}, CheckInterval: 5 * time.Second})
	for p := 0; p < parts; p++ {
		c.WaitLeader(p, 5*time.Minute)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	var used, wall time.Duration
	for i := 0; i < b.N; i++ {
		c0, t0 := cpu(), time.Now()
		time.Sleep(5 * time.Second) // idle period being measured
		used += cpu() - c0
		wall += time.Since(t0)
	}
	b.ReportMetric(used.Seconds()/wall.Seconds(), "cpu-cores")
}
