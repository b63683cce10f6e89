package partition_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// scaleCounts are the partition counts BenchmarkProduceAcrossPartitions
// rotates through, on one cell.
var scaleCounts = []int{1, 12, 100}

// BenchmarkProduceAcrossPartitions compares the cell's produce throughput
// with 1, 12 and 100 partitions in one run: one 3-broker cell of 100
// partitions over dataplane/transport on loopback (production Raft
// timeouts), 64 KiB batches acknowledged after a majority fsync. Each
// iteration is one rotation: every partition count in turn (starting with
// a different one each iteration, so none always meets the disk first)
// produces scaleBatches batches spread evenly over the first n partitions,
// with 16 produces in flight per partition up to 512 in all. The machine
// is shared and its disk swings ±50% between runs, so the figures to read
// are the ratios, measured within one rotation: MB/s of n partitions over
// MB/s of 1. Run with -benchtime=3x (or more) for three rotations; each
// rotation's figures go to the log.
func BenchmarkProduceAcrossPartitions(b *testing.B) {
	const scaleBatches = 1200 // 77 MB a phase; divisible by 12 and 100
	parts := slices.Max(scaleCounts)
	c := celltest.New(b, celltest.Options{Partitions: parts, Dir: b.TempDir(), Raft: partition.DefaultRaftConfig, CheckInterval: time.Minute})
	for p := 0; p < parts; p++ {
		c.WaitLeader(p, 2*time.Minute)
	}
	batches := make([][]byte, scaleBatches)
	for i := range batches {
		batches[i] = benchBatch(i)
	}
	size := int64(len(batches[0]))
	// Produce takes ownership of its batch (it stamps offset and epoch in
	// place), so every produce gets its own copy, made before timing.
	copies := func() [][]byte {
		out := make([][]byte, len(batches))
		for i, bt := range batches {
			out[i] = slices.Clone(bt)
		}
		return out
	}
	phase := func(n int) (mbps float64, p50, p99 time.Duration) {
		work := copies()
		start := time.Now()
		lat := produceTimed(b, c, min(16*n, 512), n, work)
		el := time.Since(start)
		slices.Sort(lat)
		return float64(size*int64(len(work))) / el.Seconds() / 1e6, lat[len(lat)/2], lat[len(lat)*99/100]
	}
	// One unmeasured phase on every partition: first appends open
	// segments and fill Raft's caches.
	phase(parts)
	mbps := make(map[int][]float64)
	b.SetBytes(size * scaleBatches * int64(len(scaleCounts)))
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for k := range scaleCounts {
			n := scaleCounts[(it+k)%len(scaleCounts)]
			v, p50, p99 := phase(n)
			mbps[n] = append(mbps[n], v)
			b.Logf("rotation %d, partitions=%d: %.1f MB/s, p50 %v, p99 %v", it+1, n, v, p50.Round(time.Millisecond), p99.Round(time.Millisecond))
		}
		one := mbps[1][it]
		b.Logf("rotation %d: 12/1 = %.2f, 100/1 = %.2f", it+1, mbps[12][it]/one, mbps[100][it]/one)
	}
	b.StopTimer()
	for _, n := range scaleCounts {
		b.ReportMetric(median(mbps[n]), fmt.Sprintf("MB/s-p%d", n))
	}
	ratios := func(n int) []float64 {
		var r []float64
		for i := range mbps[n] {
			r = append(r, mbps[n][i]/mbps[1][i])
		}
		return r
	}
	b.ReportMetric(median(ratios(12)), "x-p12/p1")
	b.ReportMetric(median(ratios(100)), "x-p100/p1")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
