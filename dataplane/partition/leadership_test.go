package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// slowRaft has timeouts no test outlives: a group that waited for one to
// elect a leader would never get one, so a leader in these tests can only
// come from a replica campaigning at once.
func slowRaft() *raft.Config {
	c := partition.DefaultRaftConfig()
	c.HeartbeatTimeout = time.Hour
	c.ElectionTimeout = time.Hour
	c.LeaderLeaseTimeout = time.Hour
	return c
}

// TestNewGroupLeadsWithoutTimeout: the preferred replica of a new group
// campaigns as soon as it opens, and the other replicas (without a
// configuration, waiting for it) grant the vote, so the group serves
// without waiting out any timeout. The cell's brokers open their replicas
// one after another, so most vote requests reach a broker before its
// replica exists (the transport holds them until it opens).
func TestNewGroupLeadsWithoutTimeout(t *testing.T) {
	const parts = 6
	start := time.Now()
	c := celltest.New(t, celltest.Options{Partitions: parts, Raft: slowRaft})
	for p := range parts {
		if l := c.WaitLeader(p, 60*time.Second); l != p%3 {
			t.Fatalf("partition %d: broker %d leads, want the preferred broker %d", p, l, p%3)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Produce(ctx, p, celltest.Batch([]byte("first")))
		cancel()
		if err != nil {
			t.Fatalf("produce to new partition %d: %v", p, err)
		}
	}
	t.Logf("%d new partitions, each acknowledged a produce %v after the cell started", parts, time.Since(start))
}
