package partition_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

var seedBenchMiB = flag.Int("seed-bench-mib", 200, "MiB of segments BenchmarkSeedCatchUp seeds a replica with")

// BenchmarkSeedCatchUp measures how fast a new replica catches up from
// the leader's segments over the real transport: a group holds about
// seed-bench-mib MiB in 16 MiB segments, its first segment deleted (so
// AppendEntries from index 1 is impossible), and each iteration starts the
// fourth replica with an empty directory and waits until it is seeded and
// at the leader's high watermark. Bytes are the segment bytes copied; the
// time includes the snapshot install, the copy, the install's CRC check
// of every batch and the index build. throttle=off is unlimited;
// throttle=64MiB is tenantd's default -seed-rate, throttle=16MiB one that
// binds. seedMB/s is the seed alone (Seeder.Busy: snapshot read, copy,
// verification and install); MB/s is the whole catch-up from the broker's
// start, Raft's retry after the empty replica's first refusal and the
// snapshot install included. The leader retries an idle follower every
// CommitTimeout, set to 100 ms here (5 s in brokers).
//
//	go test ./dataplane/partition/ -run XXX -bench SeedCatchUp -benchtime 2x
func BenchmarkSeedCatchUp(b *testing.B) {
	for _, tc := range []struct {
		name string
		rate int64
	}{{"throttle=off", 0}, {"throttle=64MiB", 64 << 20}, {"throttle=16MiB", 16 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			rc := func() *raft.Config {
				c := partition.DefaultRaftConfig()
				c.CommitTimeout = 100 * time.Millisecond
				return c
			}
			c := celltest.New(b, celltest.Options{Brokers: 4, Voters: 3, Stopped: []int{3}, Raft: rc,
				Log: log.Config{SegmentBytes: 16 << 20, RetentionAge: -1}})
			c.WaitLeader(0, time.Minute)
			val := make([]byte, 512<<10)
			for i := range 2 * *seedBenchMiB {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := c.Produce(ctx, 0, celltest.Batch([]byte(fmt.Sprint(i)), val))
				cancel()
				if err != nil {
					b.Fatalf("produce: %v", err)
				}
			}
			lead := c.Replica(c.WaitLeader(0, time.Minute), 0)
			segs := lead.Store().Log().Segments()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := lead.DeleteRecords(ctx, segs[1]); err != nil {
				b.Fatal(err)
			}
			celltest.WaitFor(b, time.Minute, "the first segment deleted everywhere", func() bool {
				done := true
				for i := range 3 {
					r := c.Replica(i, 0)
					if err := r.RetentionPass(ctx, time.Minute); err != nil {
						b.Fatal(err)
					}
					done = done && r.Store().Log().LogStartOffset() == segs[1]
				}
				return done
			})
			s := c.Server(3, 0)
			if err := lead.Raft().AddNonvoter(s.ID, s.Address, 0, time.Minute).Error(); err != nil {
				b.Fatal(err)
			}
			c.SetSeedRate(tc.rate)
			var copied int64
			var busy time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				c.StopBroker(3)
				if err := os.RemoveAll(filepath.Join(c.Dir(3), "p0")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c.StartBroker(3)
				celltest.WaitFor(b, 10*time.Minute, "the new replica seeded and caught up", func() bool {
					r := c.Replica(3, 0)
					return c.Seeder(3).Copied() > 0 && !r.Seeding() && r.HighWatermark() == lead.HighWatermark()
				})
				copied += c.Seeder(3).Copied()
				busy += c.Seeder(3).Busy()
			}
			b.StopTimer()
			b.SetBytes(copied / int64(b.N))
			b.ReportMetric(float64(copied)/float64(b.N)/(1<<20), "MiB/op")
			b.ReportMetric(float64(copied)/1e6/busy.Seconds(), "seedMB/s")
		})
	}
}
