package replicated

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// Metadata's ISR is the replicas in sync, not every assigned one: a
// stopped follower's broker drops out of it on the brokers that remain
// (on the leader and on the other follower) once their transports find
// it down, and is listed offline there, while Replicas still lists it;
// it is back in sync, and no longer offline, once its broker has
// returned.
func TestMetadataISRDropsAStoppedFollower(t *testing.T) {
	c, tn := startCell(t, 1, "isr")
	l := c.cell.WaitLeader(0, 20*time.Second)
	follower := (l + 1) % 3
	cl := c.client(t, tn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var offline []int32
	isr := func(b int) (replicas, isr []int32) {
		p := onePartitionMetadata(ctx, t, cl, int32(b+1), "isr")
		offline = p.OfflineReplicas
		return p.Replicas, slices.Sorted(slices.Values(p.ISR))
	}
	all := []int32{1, 2, 3}
	for b := range 3 {
		celltest.WaitFor(t, 20*time.Second, "every replica in sync", func() bool {
			_, got := isr(b)
			return slices.Equal(got, all)
		})
	}
	c.kill(follower)
	var without []int32
	for _, n := range all {
		if n != int32(follower+1) {
			without = append(without, n)
		}
	}
	for _, b := range []int{l, 3 - l - follower} {
		celltest.WaitFor(t, 20*time.Second, "the stopped follower out of the ISR", func() bool {
			replicas, got := isr(b)
			if len(replicas) != 3 {
				t.Fatalf("metadata from node %d lists replicas %v, want all three", b+1, replicas)
			}
			return slices.Equal(got, without)
		})
		if !slices.Equal(offline, []int32{int32(follower + 1)}) {
			t.Fatalf("metadata from node %d lists offline replicas %v, want the stopped node %d", b+1, offline, follower+1)
		}
	}
	c.restart(follower)
	celltest.WaitFor(t, 30*time.Second, "the restarted follower back in the ISR", func() bool {
		_, got := isr(l)
		return slices.Equal(got, all) && len(offline) == 0
	})
}
