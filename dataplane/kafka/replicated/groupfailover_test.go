package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// TestCoordinatorFailover: a consumer commits offsets in the middle of a
// topic and leaves; the broker coordinating its group is killed. The
// offsets partition elects a new leader, which replays the partition and
// coordinates the group: a new consumer of the group starts exactly at
// the committed offsets (nothing before them is read again, nothing
// after them skipped) and reads to the end.
func TestCoordinatorFailover(t *testing.T) {
	const (
		n     = 4000
		parts = 4
		topic = "orders"
		group = "billing"
	)
	c, tn := startReadyGroupCell(t, parts, topic, 3)
	counts := produceN(t, c, tn, topic, parts, n)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	first := c.client(t, tn, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond), kgo.FetchMaxBytes(16<<10),
		kgo.FetchMaxPartitionBytes(4<<10))
	// The first consumer reads until it has read from every partition
	// and at least a quarter of the records.
	read, from := 0, map[int32]bool{}
	for read < n/4 || len(from) < parts {
		fs := first.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			t.Fatalf("first consumer read %d records: %v", read, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { from[r.Partition] = true })
		read += fs.NumRecords()
	}
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	want, err := committed(ctx, t, first, group, topic, parts)
	if err != nil {
		t.Fatalf("fetch committed offsets: %v", err)
	}
	first.Close() // leaves the group
	t.Logf("committed %v of %v", want, counts)
	for p := range parts {
		if want[p] <= 0 {
			t.Fatalf("partition %d: committed %d after reading from it", p, want[p])
		}
	}

	node, _, err := c.coords[0].Locate(tn.Tenant.ID, group)
	if err != nil {
		t.Fatalf("locate coordinator: %v", err)
	}
	victim := node - 1
	op := groups.Partition(tn.Tenant.ID, group, c.offsets.Partitions())
	c.kill(victim)
	t.Logf("killed broker %d, coordinator of %q (offsets partition %d)", victim, group, op)
	celltest.WaitFor(t, 60*time.Second, "a new leader of the offsets partition", func() bool {
		l := c.offsets.Leader(int(op))
		return l >= 0 && l != victim
	})

	// A new member of the group resumes from the commits.
	second := c.client(t, tn, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	next := append([]int64(nil), want...)
	rest := 0
	for p := range parts {
		rest += int(counts[p] - want[p])
	}
	for got := 0; got < rest; {
		fs := second.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			t.Fatalf("second consumer read %d of %d records: %v", got, rest, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v (retried)", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: read offset %d, want %d (committed %d)", r.Partition, r.Offset, next[r.Partition], want[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
	for p := range parts {
		if next[p] != counts[p] {
			t.Fatalf("partition %d: read to %d, end is %d", p, next[p], counts[p])
		}
	}
	// The new coordinator keeps the commits.
	if err := second.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit at the new coordinator: %v", err)
	}
	if got, err := committed(ctx, t, second, group, topic, parts); err != nil || got[0] != counts[0] {
		t.Fatalf("committed after failover: %v %v, want the ends %v", got, err, counts)
	}
}
