package partition_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// keyedBenchBatch is 64 records of 1 KiB over 1,000 keys: a 64 KiB produce.
func keyedBenchBatch(seq int) []byte {
	recs := make([]keyedRec, 64)
	for i := range recs {
		v := make([]byte, 1024)
		copy(v, fmt.Sprintf("%d-%d", seq, i))
		recs[i] = keyedRec{key: fmt.Sprintf("key-%04d", (seq*64+i*7919)%1000), value: v}
	}
	return keyedBatch(time.Now().UnixMilli(), -1, 0, recs...)
}

// BenchmarkProduceWhileCleaning measures produce latency on a compacted
// partition (three replicas over the real transport, 16 producers in
// flight, 64 KiB keyed batches, 1 MiB segments) with its cleaner idle and
// with every replica's cleaner running passes back to back at a byte rate
// (8 MiB/s, replicas.DefaultCleanerRate, and 32 MiB/s, each) and a dirty
// ratio of 0, so that it rewrites the closed segments throughout: the
// three replicas share this machine's disk and cores, so the cell's
// cleaning is three times the rate. The log holds 32 MiB before the timer
// starts (the pre-fill's rolls come from the leader's passes).
func BenchmarkProduceWhileCleaning(b *testing.B) {
	for _, rate := range []int64{0, 8 << 20, 32 << 20} { // 0: no cleaner
		cleaning := rate > 0
		name := "cleaner=off"
		if cleaning {
			name = fmt.Sprintf("cleaner=%dMiBps", rate>>20)
		}
		b.Run(name, func(b *testing.B) {
			c := celltest.New(b, celltest.Options{Log: log.Config{Compacted: true, SegmentBytes: 1 << 20}, Raft: partition.DefaultRaftConfig, CheckInterval: time.Minute})
			s := partition.Settings{MaxBatchBytes: log.DefaultMaxBatchBytes,
				Log:        log.Settings{SegmentBytes: 1 << 20, SegmentAge: time.Hour, RetentionAge: -1, Compacted: true},
				Compaction: partition.CompactionSettings{DeleteRetention: time.Hour}}
			setSettings(b, c, s)
			c.WaitLeader(0, time.Minute)
			ctx := context.Background()
			pass := func(br int) error {
				r := c.Replica(br, 0)
				if r == nil {
					return nil
				}
				return r.CompactionPass(ctx, time.Now(), rate)
			}
			for i := 0; i < 512; i++ { // 32 MiB
				if _, err := c.Produce(ctx, 0, keyedBenchBatch(i)); err != nil {
					b.Fatal(err)
				}
				if i%16 == 0 {
					if err := pass(c.Leader(0)); err != nil {
						b.Fatal(err)
					}
				}
			}
			batches := make([][]byte, b.N)
			for i := range batches {
				batches[i] = keyedBenchBatch(1000 + i)
			}
			stop := make(chan struct{})
			var cleaners sync.WaitGroup
			if cleaning {
				for br := range c.Brokers() {
					cleaners.Add(1)
					go func() {
						defer cleaners.Done()
						for {
							select {
							case <-stop:
								return
							default:
							}
							if err := pass(br); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
			}
			var cleaned0 int64
			for br := range c.Brokers() {
				cleaned0 += c.Replica(br, 0).CompactionStats().BytesWritten
			}
			b.SetBytes(int64(len(batches[0])))
			lat := make([]time.Duration, b.N)
			var mu sync.Mutex
			next := 0
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						n := next
						next++
						mu.Unlock()
						if n >= b.N {
							return
						}
						start := time.Now()
						if _, err := c.Produce(ctx, 0, batches[n]); err != nil {
							b.Error(err)
							return
						}
						lat[n] = time.Since(start)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			cleaners.Wait()
			sort.Slice(lat, func(x, y int) bool { return lat[x] < lat[y] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			var cleaned int64
			for br := range c.Brokers() {
				cleaned += c.Replica(br, 0).CompactionStats().BytesWritten
			}
			b.ReportMetric(float64(cleaned-cleaned0)/float64(1<<20), "cleaned-MiB")
		})
	}
}
