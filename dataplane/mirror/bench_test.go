package mirror_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// BenchmarkMirror copies a source partition of 8 MiB (batches of 4 or
// 64 KiB) into a new three-replica destination cell with an unlimited
// puller reading 1 MiB a pull, then fences the source and promotes the
// destination. Bytes/s is the catch-up rate; cutover-ms is the time from
// the fence's start to the promotion's end with the mirror caught up,
// the pause a producer of the partition would see before it is
// redirected (the redirect itself is a later increment).
func BenchmarkMirror(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", size>>10), func(b *testing.B) { benchMirror(b, size) })
	}
}

func benchMirror(b *testing.B, size int) {
	batches := (8 << 20) / size
	var cutover time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := newMove(b, celltest.Options{}, celltest.Options{}, 0)
		m.maxBytes = 1 << 20
		ctx := ctxLong(b)
		for j := 0; j < batches; j++ {
			// A leader lost mid-commit leaves the outcome unknown; the
			// mirror copies whatever the source holds, so go on.
			if _, err := m.src.Produce(ctx, 0, celltest.Batch(bytes.Repeat([]byte{byte(j)}, size))); err != nil && ctx.Err() != nil {
				b.Fatal(err)
			}
		}
		hw := leaderOf(m.src).HighWatermark()
		b.StartTimer()
		m.startPullers()
		m.waitMirrored(hw)
		b.StopTimer()
		start := time.Now()
		end, err := leaderOf(m.src).Fence(ctx)
		if err != nil {
			b.Fatal(err)
		}
		m.promote(end)
		cutover += time.Since(start)
	}
	b.SetBytes(int64(batches * size))
	b.ReportMetric(float64(cutover.Milliseconds())/float64(b.N), "cutover-ms")
}
