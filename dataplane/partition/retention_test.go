package partition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
)

// retentionPass runs a pass on every running replica of partition 0.
func retentionPass(t *testing.T, c *celltest.Cell) {
	t.Helper()
	for b := range c.Brokers() {
		if r := c.Replica(b, 0); r != nil {
			if err := r.RetentionPass(context.Background(), waitLong); err != nil {
				t.Fatalf("retention pass on broker %d: %v", b, err)
			}
		}
	}
}

// TestRetentionReplicatedAndRestarted: the leader's retention decision
// reaches every replica as the same log start offset, files below it go
// on each once a snapshot covers them, the Raft entries file is
// checkpointed, and after every broker restarts the log start is the same
// (it is in the snapshot and never goes back).
func TestRetentionReplicatedAndRestarted(t *testing.T) {
	// celltest's batches carry timestamp 0: half an hour later nothing
	// is older than the hour's retention yet.
	now := time.UnixMilli(0).Add(30 * time.Minute)
	clock := func() time.Time { return now }
	c := celltest.New(t, celltest.Options{Log: log.Config{SegmentBytes: 2000, RetentionAge: time.Hour, Now: clock}})
	c.WaitLeader(0, waitLong)
	produceN(t, c, 0, 60)
	hw := c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark()
	for b := range c.Brokers() {
		celltest.WaitFor(t, waitLong, "every replica at the high watermark", func() bool { return c.Replica(b, 0).HighWatermark() == hw })
	}
	retentionPass(t, c)
	if s := c.Replica(0, 0).LogStartOffset(); s != 0 {
		t.Fatalf("log start %d before anything expired", s)
	}
	now = now.Add(2 * time.Hour)
	retentionPass(t, c) // the leader decides
	retentionPass(t, c) // and every follower, having applied it, deletes
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	start := lead.LogStartOffset()
	if start == 0 || start > hw {
		t.Fatalf("log start %d after retention, high watermark %d", start, hw)
	}
	celltest.WaitFor(t, waitLong, "the same log start and files on every replica", func() bool {
		for b := range c.Brokers() {
			r := c.Replica(b, 0)
			segs := r.Store().Log().Segments()
			first, _ := r.Store().FirstIndex()
			if r.LogStartOffset() != start || r.Store().Log().LogStartOffset() != start || len(segs) != 1 || first <= 1 {
				retentionPass(t, c)
				return false
			}
		}
		return true
	})
	if _, _, err := lead.Fetch(start-1, 1<<20); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("fetch below the log start: %v", err)
	}
	for b := range c.Brokers() {
		c.StopBroker(b)
	}
	for b := range c.Brokers() {
		c.StartBroker(b)
	}
	c.WaitLeader(0, waitLong)
	for b := range c.Brokers() {
		if s := c.Replica(b, 0).LogStartOffset(); s != start {
			t.Fatalf("broker %d's log start is %d after a restart, was %d", b, s, start)
		}
	}
	produceN(t, c, 0, 3)
}
