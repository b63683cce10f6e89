package launch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/celltest/history"
)

// TestDrainBrokerUnderTraffic drains broker 1 of a cell of four real broker
// processes while a franz-go idempotent producer and a consumer group run:
// every replica leaves broker 1 (its data directory ends with no partition
// in it), the broker can then be deleted, and the history holds (nothing
// acknowledged lost or doubled, dense offsets, the group's polls in order).
func TestDrainBrokerUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and four brokers")
	}
	const topic, parts = "drained", 3
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := startProcCell(t, "drain", 4)
	c.createTopic(ctx, topic, parts)
	tp, err := c.tenant.Client.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	onFirst := 0
	for _, a := range tp.Assignments {
		for _, r := range a.Replicas {
			if r == 1 {
				onFirst++
			}
		}
	}
	if onFirst == 0 {
		t.Fatalf("no partition has a replica on broker 1 (%+v): the drain would prove nothing", tp.Assignments)
	}

	tr := c.startTraffic(ctx, topic, "drain-group", 2*time.Minute)

	// Traffic first, then the drain.
	waitAcks(ctx, t, tr.chk, 200)
	tr.waitGroupRead(ctx, t, 0, "before the drain")
	// A broker whose first reports came before its replicas had a Raft
	// configuration makes the cell refuse moves (503, retriable) until
	// its next report: try again for up to a minute, as an operator would.
	// Any other refusal fails the test at once.
	var drain api.Drain
	var refused error
	if err := launch.WaitFor(ctx, "the drain starts", time.Minute, func() error {
		var err error
		drain, err = c.cp.Operator.AdminDrainBroker(ctx, "b1")
		var ce *client.Error
		if err != nil && !(errors.As(err, &ce) && ce.Retriable) {
			refused = err
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if refused != nil {
		t.Fatalf("drain refused: %v", refused)
	}
	// One move per replica on broker 1: the topic's, and the offsets
	// partitions' (the cell's three lowest node ids hold those).
	topicID, topicMoves := "", 0
	for _, m := range drain.Moves {
		if m.Topic == topic {
			topicID = m.TopicID
			topicMoves++
		}
	}
	if topicMoves != onFirst || len(drain.Moves) <= topicMoves {
		t.Fatalf("the drain started %d moves, %d of the topic's; broker 1 holds %d of its replicas and offsets partitions", len(drain.Moves), topicMoves, onFirst)
	}
	started := time.Now()
	err = launch.WaitFor(ctx, "every move of the drain completed", 4*time.Minute, func() error {
		for _, m := range drain.Moves {
			got, err := c.cp.Operator.AdminMove(ctx, m.ID)
			if err != nil {
				return err
			}
			if got.State != "completed" {
				return fmt.Errorf("move %d (partition %d) is %s: voters %v, non-voters %v, joining %+v", got.ID, got.Partition, got.State, got.Voters, got.Nonvoters, got.Joining)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	finished := time.Now()
	t.Logf("the drain's %d moves completed in %v", len(drain.Moves), finished.Sub(started).Round(10*time.Millisecond))
	read := tr.chk.Result().GroupRecords
	waitAcks(ctx, t, tr.chk, tr.chk.Result().Acks+100) // the producer goes on after the moves
	tr.waitGroupRead(ctx, t, read, "after the drain")
	tr.halt()

	// Broker 1's replicas of the topic are gone from its disk, and it can
	// be deleted.
	if err := c.waitNoReplica(ctx, 0, topicID); err != nil {
		t.Error(err)
	}
	c.procs[0].Stop(15 * time.Second)
	if err := c.cp.Operator.AdminDeleteBroker(ctx, "b1"); err != nil {
		t.Fatalf("delete the drained broker: %v", err)
	}

	// The final read, through the brokers left.
	res := tr.check(ctx, t, c, topic, parts)
	t.Logf("%d acknowledged, %d polled by the group; longest wait for an acknowledgement during the drain %v (one producer, one record at a time)",
		res.Acks, res.GroupRecords, tr.longestGap(started, finished).Round(time.Millisecond))
}

// longestGap is the longest interval without an acknowledgement between
// from and to, given the acknowledgements' times in order.
func longestGap(acks []time.Time, from, to time.Time) time.Duration {
	var gap time.Duration
	last := from
	for _, at := range acks {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			at = to
		}
		gap = max(gap, at.Sub(last))
		last = at
		if at.Equal(to) {
			break
		}
	}
	return max(gap, to.Sub(last))
}

// waitAcks waits until the checker holds at least n acknowledgements.
func waitAcks(ctx context.Context, t *testing.T, chk *history.Checker, n int) {
	t.Helper()
	if err := launch.WaitFor(ctx, fmt.Sprintf("%d acknowledged produces", n), 2*time.Minute, func() error {
		if got := chk.Result().Acks; got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// finalRead reads every partition from the start to its high watermark
// and hands each to the checker.
func finalRead(ctx context.Context, t *testing.T, cl *kgo.Client, chk *history.Checker, topic string, parts int) {
	t.Helper()
	recs := map[int32][]history.Record{}
	hws := map[int32]int64{}
	done := func() bool {
		if len(hws) < parts {
			return false
		}
		// Read up to each high watermark; a log whose start is past 0
		// (records deleted) holds fewer records than its watermark.
		for p, hw := range hws {
			if rs := recs[p]; hw > 0 && (len(rs) == 0 || rs[len(rs)-1].Offset+1 < hw) {
				return false
			}
		}
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("final read incomplete: %d partitions' high watermarks known, records %d", len(hws), len(recs))
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			hws[p.Partition] = max(hws[p.Partition], p.HighWatermark)
			for _, r := range p.Records {
				recs[p.Partition] = append(recs[p.Partition], history.Record{Part: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	for p := range int32(parts) {
		// From the log start the read began at: the checker refuses a
		// start past what the test let it trim (MayTrim).
		start := int64(0)
		if rs := recs[p]; len(rs) > 0 {
			start = rs[0].Offset
		}
		chk.FinalFrom(p, start, recs[p], hws[p])
	}
}
