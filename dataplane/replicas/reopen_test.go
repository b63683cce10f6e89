package replicas_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestDivergentReplicaReopened: the Manager reopens a replica that asks
// for it (partition.Config.Reopen). A leader cut off from its followers
// appends a tail nobody commits and stops; the new leader commits other
// entries at those indexes and deletes every record, so it can only send
// the returning replica a snapshot that overrules its tail. The replica
// cuts the tail, its Manager closes it and opens it again on its files,
// and it is seeded and follows the leader.
func TestDivergentReplicaReopened(t *testing.T) {
	c := newCellOfRaft(t, "cell-a", 3, func() *raft.Config {
		rc := celltest.TestRaftConfig()
		// A leader without followers keeps leading long enough to
		// append its tail.
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
		return rc
	})
	c.publish(wire.CellState{Tenants: []wire.Tenant{{ID: mvTenant, Name: "ten", Status: "active"}}, Topics: []wire.Topic{mvTopicOf()}})
	produce := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitMove)
		defer cancel()
		if _, err := c.Produce(ctx, 0, celltest.Batch([]byte(what))); err != nil {
			t.Fatalf("produce %s: %v", what, err)
		}
	}
	for i := range 3 {
		produce(fmt.Sprint("before ", i))
	}
	old := c.Leader(0)
	for b := range 3 {
		celltest.WaitFor(t, waitMove, "every replica applied", func() bool {
			return c.Replica(b, 0).HighWatermark() == c.Replica(old, 0).HighWatermark()
		})
	}
	for b := range 3 {
		if b != old {
			c.stop(b + 1)
		}
	}
	r := c.Replica(old, 0)
	from := r.Store().NextIndex()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := r.Produce(ctx, celltest.Batch(fmt.Appendf(nil, "tail %d", i))); err == nil {
				t.Errorf("a leader without followers committed tail batch %d", i)
			}
		}()
	}
	wg.Wait()
	if got := r.Store().NextIndex() - from; got < 12 {
		t.Fatalf("the cut-off leader appended %d entries, want 12", got)
	}
	c.stop(old + 1)
	for b := range 3 {
		if b != old {
			c.start(b + 1)
		}
	}
	produce("after 0")
	produce("after 1")
	lead := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), waitMove)
	defer cancel()
	if _, err := lead.DeleteRecords(ctx, -1); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	celltest.WaitFor(t, waitMove, "the leader's entries to start after the old leader's tail starts", func() bool {
		for b := range 3 {
			if rep := c.Replica(b, 0); rep != nil {
				_ = rep.RetentionPass(ctx, 10*time.Second)
			}
		}
		lead = c.leader()
		first, _ := lead.Store().FirstIndex()
		return lead != nil && first > from
	})

	c.start(old + 1)
	opened := c.Replica(old, 0)
	celltest.WaitFor(t, waitMove, "the old leader's replica reopened, seeded and following", func() bool {
		back, lead := c.Replica(old, 0), c.leader()
		return back != nil && lead != nil && back != opened && !back.Seeding() && back.HighWatermark() == lead.HighWatermark()
	})
	produce("after 2")
	celltest.WaitFor(t, waitMove, "the reopened replica to take new entries", func() bool {
		lead := c.leader()
		return lead != nil && c.Replica(old, 0).HighWatermark() == lead.HighWatermark()
	})
	back, lead := c.Replica(old, 0), c.leader()
	x := celltest.StoredBytes(t, back, back.LogStartOffset(), lead.HighWatermark())
	y := celltest.StoredBytes(t, lead, lead.LogStartOffset(), lead.HighWatermark())
	if back.LogStartOffset() != lead.LogStartOffset() || len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("the reopened replica's log (from %d, %d bytes) is not the leader's (from %d, %d bytes)",
			back.LogStartOffset(), len(x), lead.LogStartOffset(), len(y))
	}
}
