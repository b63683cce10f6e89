package partition_test

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
)

var soak = flag.Duration("soak", 0, "run randomized fault runs for this long: go test ./dataplane/partition/ -run TestFaultsSoak -soak=5m")

// TestFaults runs short randomized fault runs: producers and readers on two
// partitions while a nemesis kills leaders or followers, cuts the leader
// off, restarts the whole cell from disk, or cuts the power of the leader
// or of the whole cell (unsynced writes lost, torn tails); then checks the
// history. The
// seed fixes which faults are injected; what is asserted never depends on
// timing.
func TestFaults(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 5
	}
	for i := 1; i <= runs; i++ {
		seed := int64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { faultRun(t, seed, 2, false) })
	}
}

// TestFaultsWithRetention is TestFaults while the log start moves: every
// 200 ms the leader replicates a DeleteRecords to 40 offsets below the
// high watermark and every replica runs a retention pass (segments of
// 4 KiB deleted, Raft entries files checkpointed), and readers that fall
// below the log start move on to it. The checker excuses records below
// the log start only up to where DeleteRecords was asked to move it.
func TestFaultsWithRetention(t *testing.T) {
	runs := 6
	if testing.Short() {
		runs = 2
	}
	for i := 1; i <= runs; i++ {
		seed := int64(100 + i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { faultRun(t, seed, 2, true) })
	}
}

func TestFaultsSoak(t *testing.T) {
	if *soak == 0 {
		t.Skip("soak test: go test ./dataplane/partition/ -run TestFaultsSoak -soak=5m")
	}
	end := time.Now().Add(*soak)
	base := time.Now().UnixNano()
	for i := int64(0); time.Now().Before(end); i++ {
		seed := base + i
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { faultRun(t, seed, 6, seed%2 == 0) }) {
			return
		}
	}
}

func faultRun(t *testing.T, seed int64, cycles int, trim bool) {
	rng := rand.New(rand.NewSource(seed))
	const parts = 2
	opts := celltest.Options{Partitions: parts}
	if trim {
		// No deletion by age (the workload's batches carry timestamp 0);
		// DeleteRecords moves the log start.
		opts.Log = log.Config{SegmentBytes: 4096, RetentionAge: -1}
	}
	c := celltest.New(t, opts)
	for p := 0; p < parts; p++ {
		c.WaitLeader(p, waitLong)
	}
	chk := celltest.NewChecker()
	w := celltest.StartWorkload(c, chk, 2, 2)
	defer w.Stop()
	if trim {
		w.Trim(100*time.Millisecond, 10)
	}
	progress := func(what string) {
		from := w.Acks()
		celltest.WaitFor(t, waitLong, what, func() bool { return w.Acks() >= from+10 })
	}
	progress("produces to be acknowledged before any fault")
	for k := 0; k < cycles; k++ {
		f := celltest.RandomFault(rng)
		desc, heal := c.Inject(rng, f, rng.Intn(parts))
		hold := time.Duration(200+rng.Intn(500)) * time.Millisecond
		t.Logf("fault %d: %s for %s", k, desc, hold)
		time.Sleep(hold) // the fault's duration, part of the schedule; no state is awaited here
		heal()
		progress(fmt.Sprintf("progress after healing %q", desc))
	}
	if trim {
		// Every partition's log start has moved before the history ends
		// (the trimming runs on while the workload does).
		celltest.WaitFor(t, waitLong, "the log start to move on every partition", func() bool {
			for p := 0; p < parts; p++ {
				b := c.Leader(p)
				if b < 0 || c.Replica(b, p) == nil || c.Replica(b, p).LogStartOffset() == 0 {
					return false
				}
			}
			return true
		})
	}
	w.Stop()
	for p := 0; p < parts; p++ {
		celltest.FinalRead(t, c, chk, p, waitLong)
	}
	if trim {
		for p := 0; p < parts; p++ {
			r := c.Replica(c.WaitLeader(p, waitLong), p)
			t.Logf("partition %d: log start %d, high watermark %d, %d segments", p, r.LogStartOffset(), r.HighWatermark(), len(r.Store().Log().Segments()))
		}
	}
	if errs := chk.Errors(); len(errs) > 0 {
		t.Fatalf("history violates the delivery contract (seed %d):\n%s", seed, strings.Join(errs, "\n"))
	}
	var seeded int64
	for b := range c.Brokers() {
		if s := c.Seeder(b); s != nil {
			seeded += s.Copied()
		}
	}
	t.Logf("seed %d: %s, %d non-empty reads, %d segment bytes seeded since the brokers last started", seed, chk.Summary(), w.Reads(), seeded)
}
