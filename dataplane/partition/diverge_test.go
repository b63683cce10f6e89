package partition_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// leaseRaftConfig keeps a leader that lost its followers leading for 2 s,
// long enough to append an uncommitted tail.
func leaseRaftConfig() *raft.Config {
	c := celltest.TestRaftConfig()
	c.HeartbeatTimeout = 2 * time.Second
	c.ElectionTimeout = 2 * time.Second
	c.LeaderLeaseTimeout = 2 * time.Second
	return c
}

// TestDivergentTailSeeded: a leader cut off from its followers appends
// entries nobody commits, and stops. The other two elect a leader, which
// commits other entries at those indexes and then deletes every record
// (the usage topic's shipper does this every few seconds), so its store
// no longer holds the indexes where the old leader's tail starts. When
// the old leader returns, Raft can only send it a snapshot, which leaves
// its store alone: if the store holds the snapshot's index with its own
// term, every append after it fails; if it ends before the snapshot's
// index while holding the snapshot's high watermark, the store refuses
// the next entry. Without diverge.go the leader installed the same
// snapshot hundreds of times a second for ever. Now the replica cuts the
// tail (reopened when Raft has read it), is seeded, holds the same bytes
// as the leader and takes new entries, and it never unseated the leader
// (without the fix, the second kind won elections it could not serve).
func TestDivergentTailSeeded(t *testing.T) {
	for _, tc := range []struct {
		name string
		// tail: uncommitted batches on the old leader, of records
		// records each; after: batches the new leader commits.
		tail, records, after int
		reopened             bool
	}{
		{name: "tail holds the snapshot's index", tail: 12, records: 1, after: 2, reopened: true},
		{name: "tail ends before the snapshot's index", tail: 4, records: 40, after: 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := celltest.New(t, celltest.Options{Log: seedLog, Raft: leaseRaftConfig})
			old := c.WaitLeader(0, waitLong)
			produceKiB(t, c, 3)
			for b := range c.Brokers() {
				celltest.WaitFor(t, waitLong, "every replica applied", func() bool {
					return c.Replica(b, 0).HighWatermark() == c.Replica(old, 0).HighWatermark()
				})
			}
			for b := range c.Brokers() {
				if b != old {
					c.StopBroker(b)
				}
			}
			r := c.Replica(old, 0)
			from := r.Store().NextIndex()
			var wg sync.WaitGroup
			for i := range tc.tail {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					vals := make([][]byte, tc.records)
					for j := range vals {
						vals[j] = []byte(fmt.Sprintf("tail %d.%d", i, j))
					}
					if _, err := r.Produce(ctx, celltest.Batch(vals...)); err == nil {
						t.Errorf("a leader without followers committed tail batch %d", i)
					}
				}()
			}
			wg.Wait()
			if got := r.Store().NextIndex() - from; got < uint64(tc.tail) {
				t.Fatalf("the cut-off leader appended %d entries, want %d", got, tc.tail)
			}
			tailEnd := r.Store().Log().NextOffset()
			c.StopBroker(old)

			for b := range c.Brokers() {
				if b != old {
					c.StartBroker(b)
				}
			}
			for i := range tc.after {
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				_, err := c.Produce(ctx, 0, celltest.Batch([]byte(fmt.Sprintf("after %d", i))))
				cancel()
				if err != nil {
					t.Fatalf("produce %d: %v", i, err)
				}
			}
			lead := c.Replica(c.WaitLeader(0, waitLong), 0)
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if _, err := lead.DeleteRecords(ctx, -1); err != nil {
				t.Fatalf("delete records: %v", err)
			}
			// Past the tail's first index, or its whole when the leader
			// has entries there: no append reaches the old leader then.
			past := from
			if tc.after > tc.tail {
				past = r.Store().NextIndex()
			}
			celltest.WaitFor(t, waitLong, "the leader's entries to start after the old leader's tail", func() bool {
				retentionPass(t, c)
				lead = c.Replica(c.WaitLeader(0, waitLong), 0)
				first, _ := lead.Store().FirstIndex()
				return first > past
			})
			snapIndex, snapHW := lead.Raft().LastIndex(), lead.HighWatermark()
			t.Logf("old leader's tail: indexes %d–%d, offsets to %d; leader at index %d, high watermark %d",
				from, r.Store().NextIndex()-1, tailEnd, snapIndex, snapHW)

			term := lead.Raft().CurrentTerm()
			c.StartBroker(old)
			back := c.Replica(old, 0)
			celltest.WaitFor(t, waitLong, "the old leader seeded to the leader's high watermark", func() bool {
				back = c.Replica(old, 0)
				lead = c.Replica(c.WaitLeader(0, waitLong), 0)
				return !back.Seeding() && back.HighWatermark() == lead.HighWatermark() &&
					back.Store().Log().LogStartOffset() == lead.Store().Log().LogStartOffset()
			})
			if got := lead.Raft().CurrentTerm(); got != term {
				t.Fatalf("the returning replica cost elections: term %d, was %d", got, term)
			}
			if got := c.Reopened() > 0; got != tc.reopened {
				t.Fatalf("replicas reopened: %d, want any: %v", c.Reopened(), tc.reopened)
			}
			produceKiB(t, c, 2)
			celltest.WaitFor(t, waitLong, "the seeded replica to take new entries", func() bool {
				lead = c.Replica(c.WaitLeader(0, waitLong), 0)
				return c.Replica(old, 0).HighWatermark() == lead.HighWatermark()
			})
			back, lead = c.Replica(old, 0), c.Replica(c.WaitLeader(0, waitLong), 0)
			sameBytes(t, back, lead, lead.LogStartOffset(), lead.HighWatermark())
			if got, want := back.Store().Log().NextOffset(), lead.Store().Log().NextOffset(); got != want {
				t.Fatalf("the old leader's log ends at %d, the leader's at %d", got, want)
			}
		})
	}
}
