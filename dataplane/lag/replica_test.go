package lag

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// Every replica of a partition, leader or follower, measures the same lag
// once it has applied the same prefix: the coordinator may measure against
// whichever replica it holds.
func TestReplicaPartition(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	leader := c.WaitLeader(0, 30*time.Second)
	now := time.Now()
	produceAged(t, c, now)
	var ms []Measurement
	for b := range c.Brokers() {
		p := ReplicaPartition(c.Replica(b, 0))
		celltest.WaitFor(t, 30*time.Second, "replica applies every batch", func() bool { return p.HighWatermark() == 10 })
		m, err := Measure(p, 4, Retention{Ms: time.Hour.Milliseconds()}, now)
		if err != nil {
			t.Fatalf("broker %d: %v", b, err)
		}
		ms = append(ms, m)
	}
	want := ms[leader]
	if want.Records != 6 || want.Bytes <= 0 || want.Seconds != 180 || want.HighWatermark != 10 {
		t.Fatalf("leader measures %+v", want)
	}
	for b, m := range ms {
		if m != want {
			t.Fatalf("broker %d measures %+v, the leader %+v", b, m, want)
		}
	}
}

// A group whose committed offset DeleteRecords passed is measured against
// the replicated log start, which every replica applies at once, not the
// first offset its segment files still hold (the active segment, which is
// never deleted, keeps records below the log start): the unread records
// were deleted, on every replica.
func TestReplicaPartitionAfterDeleteRecords(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	c.WaitLeader(0, 30*time.Second)
	now := time.Now()
	produceAged(t, c, now)
	lead := c.Replica(c.WaitLeader(0, 30*time.Second), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if start, err := lead.DeleteRecords(ctx, 6); err != nil || start != 6 {
		t.Fatalf("delete records to 6: %d %v", start, err)
	}
	for b := range c.Brokers() {
		r := c.Replica(b, 0)
		celltest.WaitFor(t, 30*time.Second, "replica applies the log start", func() bool { return r.LogStartOffset() == 6 })
		if fs := r.Store().Log().LogStartOffset(); fs >= 6 {
			t.Fatalf("broker %d: the segment files start at %d: the test needs them below the log start", b, fs)
		}
		m, err := Measure(ReplicaPartition(r), 4, Retention{Ms: time.Hour.Milliseconds()}, now)
		if err != nil {
			t.Fatalf("broker %d: %v", b, err)
		}
		if !m.Expired || m.LogStartOffset != 6 || m.Records != 4 || m.Seconds != 120 || m.RetentionFraction < 1 {
			t.Fatalf("broker %d measures %+v; want expired, log start 6, 4 records 120 s old", b, m)
		}
	}
}

// produceAged produces five batches of two 50-byte records to partition
// 0 of c, stamped five, four, three, two and one minute before now.
func produceAged(t *testing.T, c *celltest.Cell, now time.Time) {
	t.Helper()
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Produce(ctx, 0, batchAt(now.UnixMilli()-int64(5-i)*60_000, 2, 50))
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}
