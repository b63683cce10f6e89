package partition_test

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
)

// BenchmarkRetentionPass measures one retention pass over a broker's
// partitions (1,000 by default; SLUICE_BENCH_PARTITIONS overrides), each
// led here with a few closed segments and nothing yet old enough to delete:
// the steady state the replica manager repeats every few seconds. It
// reports the wall time and the CPU time (user + system) of a whole pass.
func BenchmarkRetentionPass(b *testing.B) {
	parts := 1000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PARTITIONS")); err == nil && v > 0 {
		parts = v
	}
	now := time.UnixMilli(0).Add(time.Minute) // celltest batches carry timestamp 0
	c := celltest.New(b, celltest.Options{Brokers: 1, Partitions: parts,
		Log: log.Config{SegmentBytes: 150, RetentionAge: time.Hour, Now: func() time.Time { return now }}})
	ctx := context.Background()
	for p := range parts {
		c.WaitLeader(p, time.Minute)
		for i := range 4 {
			if _, err := c.Produce(ctx, p, celltest.Batch([]byte(strconv.Itoa(i)))); err != nil {
				b.Fatal(err)
			}
		}
	}
	reps := make([]interface {
		RetentionPass(context.Context, time.Duration) error
	}, parts)
	for p := range parts {
		reps[p] = c.Replica(0, p)
		if n := len(c.Replica(0, p).Store().Log().Segments()); n < 2 {
			b.Fatalf("partition %d has %d segments", p, n)
		}
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		for _, r := range reps {
			if err := r.RetentionPass(ctx, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/pass")
	b.ReportMetric(float64(parts), "partitions")
	if s := c.Replica(0, 0).LogStartOffset(); s != 0 {
		b.Fatalf("the pass deleted data: log start %d", s)
	}
	// Then one pass in which every partition's closed segments expire:
	// a Raft round, a snapshot and the file deletions per partition.
	now = now.Add(2 * time.Hour)
	t0 := time.Now()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for _, r := range reps {
		if err := r.RetentionPass(ctx, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "deleting-pass-ms")
	b.ReportMetric(float64(time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()).Milliseconds()), "deleting-pass-cpu-ms")
	for p := range parts {
		if c.Replica(0, p).LogStartOffset() == 0 {
			b.Fatalf("partition %d deleted nothing", p)
		}
	}
}
