package partition_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// The methods the Kafka listener uses beyond Produce and Fetch: EpochEnd
// across a leader change, Watch on high-watermark moves, Leader, and
// not-leader errors that carry LeaderNode.
func TestKafkaSeam(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	// Wait for the preferred leader, so no transfer changes the epoch (or
	// wakes watchers) under the test.
	celltest.WaitFor(t, waitLong, "broker 0 (preferred) to lead", func() bool { return c.Leader(0) == 0 })
	lb := 0
	produceN(t, c, 0, 3) // offsets 0-5
	r := c.Replica(lb, 0)
	e1 := r.LeaderEpoch()
	if ep, end, ok, err := r.EpochEnd(e1); err != nil || !ok || ep != e1 || end != 6 {
		t.Fatalf("EpochEnd(%d) = %d, %d, %v, %v; want %d, 6", e1, ep, end, ok, err, e1)
	}
	if _, _, ok, _ := r.EpochEnd(e1 - 1); ok {
		t.Fatalf("EpochEnd(%d) found an epoch before the first", e1-1)
	}
	// The cell maps its ids ("b0") to node ids (celltest.NodeOf): Leader
	// names the leader's node, and so does a follower's NotLeaderError.
	if n, ok := r.Leader(); !ok || n != 1 {
		t.Fatalf("Leader() = %d, %v; want node 1", n, ok)
	}
	_, err := followerRefuses(t, c, lb)
	var ln interface{ LeaderNode() (int, bool) }
	if !errors.As(err, &ln) {
		t.Fatalf("follower produce error %v has no LeaderNode", err)
	}
	if n, ok := ln.LeaderNode(); !ok || n != 1 {
		t.Fatalf("follower produce error names node %d, %v; want node 1", n, ok)
	}
	if !errors.As(partition.ErrClosed, &ln) {
		t.Fatal("ErrClosed has no LeaderNode")
	}

	// Watch: at once when already above, else on the next commit.
	wake := make(chan struct{}, 1)
	cancel := r.Watch(5, wake)
	select {
	case <-wake:
	case <-time.After(waitLong):
		t.Fatal("Watch below the high watermark did not fire at once")
	}
	cancel()
	cancel = r.Watch(6, wake)
	defer cancel()
	select {
	case <-wake:
		t.Fatal("Watch at the high watermark fired before anything moved")
	default:
	}
	produceN(t, c, 0, 1)
	select {
	case <-wake:
	case <-time.After(waitLong):
		t.Fatal("Watch did not fire when the high watermark moved")
	}

	// A new epoch: the old one now ends where the new one's data starts.
	c.StopBroker(lb)
	nb := c.WaitLeader(0, waitLong)
	produceN(t, c, 0, 1) // offsets 8-9 in the new epoch
	r2 := c.Replica(nb, 0)
	e2 := r2.LeaderEpoch()
	if ep, end, ok, _ := r2.EpochEnd(e1); !ok || ep != e1 || end != 8 {
		t.Fatalf("after failover EpochEnd(%d) = %d, %d, %v; want %d, 8", e1, ep, end, ok, e1)
	}
	if ep, end, ok, _ := r2.EpochEnd(e2); !ok || ep != e2 || end != 10 {
		t.Fatalf("EpochEnd(%d) = %d, %d, %v; want %d, 10", e2, ep, end, ok, e2)
	}
	if ep, _, ok, _ := r2.EpochEnd(e2 - 1); e2-1 > e1 && (!ok || ep != e1) {
		t.Fatalf("EpochEnd(%d) between epochs = %d, %v; want %d", e2-1, ep, ok, e1)
	}
}
