package partition_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// BenchmarkFailoverOfManyLeaders times the failover of a broker that
// leads a third of a cell's 300 partitions, a few seconds after another
// broker restarted (as `make bench`'s kill phase and the chaos nemeses
// do) and under produce load: one 3-broker cell over dataplane/transport
// on loopback with production Raft timeouts. Each iteration restarts the
// leader of partition 1's broker, waits 2.5 s, starts 24 producers
// writing 16 KiB batches round the partitions, waits 3 s, stops the
// leader of partition 0's broker and reports, over the partitions that
// broker led, the time from the stop to a new serving leader: first, p50
// and last (the metric "last-s" is the one the failover goal bounds at
// two seconds). The producers stop and the stopped broker starts again
// before the next iteration.
func BenchmarkFailoverOfManyLeaders(b *testing.B) {
	const parts = 300
	c := celltest.New(b, celltest.Options{Partitions: parts, Dir: b.TempDir(), Raft: partition.DefaultRaftConfig})
	waitAllLed := func() {
		for p := range parts {
			c.WaitLeader(p, 2*time.Minute)
		}
	}
	load := func() (stop func()) {
		done := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 24 {
			wg.Go(func() {
				batch := make([]byte, 16<<10)
				for i := g; ; i += 24 {
					select {
					case <-done:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, _ = c.Produce(ctx, i%parts, celltest.Batch(batch)) // errors are the failover being measured
					cancel()
				}
			})
		}
		return func() { close(done); wg.Wait() }
	}
	waitAllLed()
	var firsts, p50s, lasts []time.Duration
	b.ResetTimer()
	for range b.N {
		restarted := c.Leader(1)
		c.StopBroker(restarted)
		time.Sleep(1500 * time.Millisecond) // found down (DownAfter 1 s): its partitions fail over
		c.StartBroker(restarted)
		time.Sleep(2500 * time.Millisecond)
		stopLoad := load()
		time.Sleep(3 * time.Second)
		dead := c.Leader(0)
		led := c.LedBy(dead)
		start := time.Now()
		c.StopBroker(dead)
		var served []time.Duration
		for len(led) > 0 && time.Since(start) < 2*time.Minute {
			led = slices.DeleteFunc(led, func(p int) bool {
				if l := c.Leader(p); l >= 0 && l != dead {
					served = append(served, time.Since(start))
					return true
				}
				return false
			})
			time.Sleep(10 * time.Millisecond)
		}
		stopLoad()
		if len(led) > 0 {
			b.Fatalf("%d partitions without a serving leader 2 minutes after broker %d stopped", len(led), dead)
		}
		slices.Sort(served)
		first, p50, last := served[0], served[len(served)/2], served[len(served)-1]
		b.Logf("broker %d restarted, then broker %d stopped: %d partitions served first %v, p50 %v, last %v",
			restarted, dead, len(served), first, p50, last)
		firsts, p50s, lasts = append(firsts, first), append(p50s, p50), append(lasts, last)
		c.StartBroker(dead)
		waitAllLed()
	}
	b.StopTimer()
	b.ReportMetric(slices.Max(firsts).Seconds(), "first-s")
	b.ReportMetric(slices.Max(p50s).Seconds(), "p50-s")
	b.ReportMetric(slices.Max(lasts).Seconds(), "last-s")
}
