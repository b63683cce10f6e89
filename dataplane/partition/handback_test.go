package partition_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// TestIdleLeadershipReturnsToPreferred (issue 17): with the production
// Raft timeouts (heartbeat 10 s, commit 5 s) and check interval (1 s), the
// preferred replica of a partition that nothing is produced to gets
// leadership back after its broker stops and restarts. Once it is caught
// up, the only traffic a leader sends it is heartbeats (every 1–2 s) and
// empty appends (every 5–10 s), so the leader must judge it caught up and
// healthy from those alone. Each wait is bounded well above the expected
// few seconds (3 check intervals settled, 3 healthy, then the transfer).
func TestIdleLeadershipReturnsToPreferred(t *testing.T) {
	opts := celltest.Options{Partitions: 1, Raft: partition.DefaultRaftConfig, CheckInterval: time.Second}
	produce := func(t *testing.T, c *celltest.Cell, n int) {
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Produce(ctx, 0, celltest.Batch([]byte("x")))
			cancel()
			if err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	otherLeader := func(t *testing.T, c *celltest.Cell, not int) int {
		celltest.WaitFor(t, 60*time.Second, "a leader other than the stopped broker", func() bool {
			l := c.Leader(0)
			return l >= 0 && l != not
		})
		return c.Leader(0)
	}
	back := func(t *testing.T, c *celltest.Cell, pref int, since time.Time) {
		celltest.WaitFor(t, 60*time.Second, "leadership back on the idle partition's preferred broker", func() bool { return c.Leader(0) == pref })
		t.Logf("leadership back on preferred broker %d %v after the restart", pref, time.Since(since))
	}

	// The preferred broker crashes (as SIGKILL or a power cut would:
	// torn, unsynced tail) while a producer writes; the new leader takes
	// a backlog it misses (many AppendEntries batches: MaxAppendEntries is
	// 64); it restarts, and then the partition is idle, so nothing but
	// replication of that backlog can catch it up.
	t.Run("crash far behind then idle", func(t *testing.T) {
		c := celltest.New(t, opts)
		pref := c.WaitLeader(0, 60*time.Second)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = c.Produce(ctx, 0, celltest.Batch([]byte("x"))) // may fail: the leader crashes
				cancel()
			}
		}()
		produce(t, c, 20)
		c.CrashBroker(pref, rand.New(rand.NewSource(1)))
		close(stop)
		<-done
		otherLeader(t, c, pref)
		produce(t, c, 2500)
		start := time.Now()
		c.StartBroker(pref)
		back(t, c, pref, start)
	})

	// cmd/compare's kill sequence: the preferred broker stops and
	// restarts, and the broker that took over is stopped at once, before
	// any hand-back; a third broker may win, and must hand back.
	t.Run("second leader stopped too", func(t *testing.T) {
		c := celltest.New(t, opts)
		pref := c.WaitLeader(0, 60*time.Second)
		c.StopBroker(pref)
		second := otherLeader(t, c, pref)
		c.StartBroker(pref)
		c.StopBroker(second)
		otherLeader(t, c, second)
		start := time.Now()
		c.StartBroker(second)
		back(t, c, pref, start)
	})
}
