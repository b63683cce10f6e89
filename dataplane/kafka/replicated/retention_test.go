package replicated

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// fastRetention runs the replica managers' retention pass every 100 ms.
func fastRetention(c *replicas.Config) { c.RetentionInterval = 100 * time.Millisecond }

// produceMiB produces n records of 100 KiB to partition 0 of topic.
func produceMiB(t *testing.T, c *managedCell, tn *cptest.Tenant, topic string, n int) {
	t.Helper()
	cl := c.client(tn, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	val := bytes.Repeat([]byte("r"), 100<<10)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: val, Partition: 0}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// agreedStart waits until every replica of partition 0 has the same log
// start offset, above 0, with its whole segments below it deleted and its
// Raft entries file checkpointed, and cond holds for every replica; it
// returns that offset.
func agreedStart(t *testing.T, c *managedCell, topicID string, cond func(b int) bool) int64 {
	t.Helper()
	var start int64
	celltest.WaitFor(t, 20*time.Second, "the same log start on every replica, segments below it deleted", func() bool {
		start = c.replica(0, topicID, 0).LogStartOffset()
		if start == 0 {
			return false
		}
		for b := range c.mgrs {
			r := c.replica(b, topicID, 0)
			l := r.Store().Log()
			segs := l.Segments()
			first, _ := r.Store().FirstIndex()
			if r.LogStartOffset() != start || l.LogStartOffset() != start || segs[0] > start ||
				(len(segs) > 1 && segs[1] <= start) || start > r.HighWatermark() || first <= 1 || !cond(b) {
				return false
			}
		}
		return true
	})
	return start
}

// TestRetentionByTime: a topic with a two-second retention and 1 MiB
// segments, produced to through Kafka, keeps only its active segment on
// all three replicas once its closed segments' newest records are older
// than the window; every replica has the same log start offset, which a
// consumer from the earliest offset starts at, and which stays after a
// leader change.
func TestRetentionByTime(t *testing.T) {
	c := startLifecycleCell(t, fastRetention)
	tn := c.cp.Signup("acme", "admin")
	topicID := c.createTopic(tn, "short", 1, map[string]string{"segment.bytes": "1048576", "retention.ms": "2000"})
	produceMiB(t, c, tn, "short", 40) // about 4 MiB: four closed segments
	// Four closed segments, unless retention already took some: on a busy
	// machine producing 4 MiB can take longer than the 2 s window.
	for b := range c.mgrs {
		r := c.replica(b, topicID, 0)
		if n := len(r.Store().Log().Segments()); n < 4 && r.LogStartOffset() == 0 {
			t.Fatalf("broker %d has %d segments after 4 MiB with 1 MiB segments, and retention removed none", b, n)
		}
	}
	hw := c.leader(topicID, 0).HighWatermark()
	start := agreedStart(t, c, topicID, func(b int) bool {
		return len(c.replica(b, topicID, 0).Store().Log().Segments()) == 1
	})
	if start > hw {
		t.Fatalf("log start %d above the high watermark %d", start, hw)
	}

	cons := c.client(tn, kgo.ConsumeTopics("short"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fs := cons.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != start {
		t.Fatalf("consumer from the earliest offset got %v, want offset %d first", recs, start)
	}

	// Another leader keeps the same log start.
	old := c.leader(topicID, 0)
	if err := old.Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	celltest.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		l := c.leader(topicID, 0)
		return l != nil && l != old
	})
	for b := range c.mgrs {
		if got := c.replica(b, topicID, 0).LogStartOffset(); got < start {
			t.Fatalf("broker %d's log start went back from %d to %d after a leader change", b, start, got)
		}
	}
}

// TestRetentionByBytes: with retention.bytes of 2 MiB and 1 MiB segments,
// the oldest whole segments go while the log stays at least 2 MiB, the
// same log start on every replica.
func TestRetentionByBytes(t *testing.T) {
	c := startLifecycleCell(t, fastRetention)
	tn := c.cp.Signup("acme", "admin")
	const keep = 2 << 20
	topicID := c.createTopic(tn, "sized", 1, map[string]string{"segment.bytes": "1048576", "retention.bytes": fmt.Sprint(keep)})
	produceMiB(t, c, tn, "sized", 60) // about 6 MiB
	agreedStart(t, c, topicID, func(b int) bool {
		sz := c.replica(b, topicID, 0).Store().Log().Size()
		return sz >= keep && sz < keep+2<<20
	})
}
