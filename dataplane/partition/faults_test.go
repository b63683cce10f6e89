package partition_test

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
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
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { faultRun(t, seed, 2) })
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
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { faultRun(t, seed, 6) }) {
			return
		}
	}
}

func faultRun(t *testing.T, seed int64, cycles int) {
	rng := rand.New(rand.NewSource(seed))
	const parts = 2
	c := celltest.New(t, celltest.Options{Partitions: parts})
	for p := 0; p < parts; p++ {
		c.WaitLeader(p, waitLong)
	}
	chk := celltest.NewChecker()
	w := celltest.StartWorkload(c, chk, 2, 2)
	defer w.Stop()
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
	w.Stop()
	for p := 0; p < parts; p++ {
		celltest.FinalRead(t, c, chk, p, waitLong)
	}
	if errs := chk.Errors(); len(errs) > 0 {
		t.Fatalf("history violates the delivery contract (seed %d):\n%s", seed, strings.Join(errs, "\n"))
	}
	t.Logf("seed %d: %s, %d non-empty reads", seed, chk.Summary(), w.Reads())
}
