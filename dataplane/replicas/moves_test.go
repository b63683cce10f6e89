package replicas_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

const moveWait = 60 * time.Second

var (
	from123  = wire.Partition{Partition: 0, Replicas: []int{1, 2, 3}}
	to456    = wire.Partition{Partition: 0, Replicas: []int{4, 5, 6}}
	move1to4 = wire.Partition{Partition: 0, Replicas: []int{1, 2, 3, 4, 5, 6}, Adding: []int{4, 5, 6}, Removing: []int{1, 2, 3}}
	move4to1 = wire.Partition{Partition: 0, Replicas: []int{4, 5, 6, 1, 2, 3}, Adding: []int{1, 2, 3}, Removing: []int{4, 5, 6}}
)

// startMoveCell is a 6-broker cell whose partition is on 1,2,3 with a
// serving leader, and a workload (two producers, two readers) on it that
// has been acknowledged a few times.
func startMoveCell(t *testing.T) (*moveCell, *celltest.Workload, *celltest.Checker) {
	t.Helper()
	c := newMoveCell(t, 6)
	c.apply(from123)
	celltest.WaitFor(t, moveWait, "a serving leader on 1,2,3", func() bool { return c.Leader(0) >= 0 })
	chk := celltest.NewChecker()
	w := celltest.StartWorkload(c, chk, 2, 2)
	t.Cleanup(w.Stop)
	waitAcks(t, w, 50)
	return c, w, chk
}

func waitAcks(t *testing.T, w *celltest.Workload, more int64) {
	t.Helper()
	want := w.Acks() + more
	celltest.WaitFor(t, moveWait, "acknowledged produces", func() bool { return w.Acks() >= want })
}

// finish stops the workload, reads the whole partition and checks the
// history: nothing acknowledged lost, no duplicate, dense offsets, high
// watermark monotonic for every reader.
func finish(t *testing.T, c *moveCell, w *celltest.Workload, chk *celltest.Checker) {
	t.Helper()
	waitAcks(t, w, 50)
	w.Stop()
	celltest.FinalRead(t, c, chk, 0, moveWait)
	t.Logf("history: %s", chk.Summary())
	for _, e := range chk.Errors() {
		t.Error(e)
	}
}

// TestMoveReplicasUnderLoad: the partition moves from 1,2,3 to 4,5,6 of a
// 6-broker cell while producers and readers run; the history holds and
// 1,2,3 end without the replica or its data.
func TestMoveReplicasUnderLoad(t *testing.T) {
	c, w, chk := startMoveCell(t)
	began := time.Now()
	w.ResetAckGap()
	c.apply(move1to4)
	c.waitVoters(moveWait, 4, 5, 6)
	converged := time.Since(began)
	gap := w.MaxAckGap()
	c.apply(to456)
	c.waitGone(moveWait, 1, 2, 3)
	for _, n := range []int{4, 5, 6} {
		celltest.WaitFor(t, moveWait, "the new replicas reporting voters 4,5,6", func() bool {
			st, ok := c.status(n)
			return ok && slices.Equal(st.Voters, []int{4, 5, 6}) && len(st.Nonvoters) == 0
		})
	}
	t.Logf("move: configuration at 4,5,6 after %v, old replicas deleted after %v; longest gap between acknowledged produces during it %v",
		converged, time.Since(began), gap)
	finish(t, c, w, chk)
}

// TestMoveSurvivesLeaderLoss: the source leader's broker stops for good
// mid-move, once the first joiner is in the configuration, or at once
// after the first promotion committed (the joiner may not have that entry
// yet while the others already count it as a voter: they need its vote to
// elect the leader that would send it); the move completes on the brokers
// left.
func TestMoveSurvivesLeaderLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		when func(voters, nonvoters []int) bool
	}{
		{"after the first join", func(v, nv []int) bool { return len(nv) > 0 || len(v) > 3 }},
		{"after the first promotion", func(v, nv []int) bool { return len(v) > 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w, chk := startMoveCell(t)
			c.apply(move1to4)
			celltest.WaitFor(t, moveWait, "the move's progress", func() bool {
				v, nv, ok := c.membership()
				return ok && tc.when(v, nv)
			})
			dead := c.Leader(0) + 1
			if dead < 1 || dead > 3 {
				t.Fatalf("leader on node %d, want one of 1,2,3", dead)
			}
			v, nv, _ := c.membership()
			t.Logf("stopping the source leader, node %d, at voters %v non-voters %v", dead, v, nv)
			began := time.Now()
			c.stop(dead)
			c.waitVoters(moveWait, 4, 5, 6)
			t.Logf("move completed %v after the leader stopped", time.Since(began))
			c.apply(to456)
			var rest []int
			for _, n := range []int{1, 2, 3} {
				if n != dead {
					rest = append(rest, n)
				}
			}
			c.waitGone(moveWait, rest...)
			finish(t, c, w, chk)
		})
	}
}

// TestMoveCancelledRollsBack: a move from 1,2,3 to 4,5,6 cancelled once the
// first non-voter joined (the target is 1,2,3 again) ends on 1,2,3, and
// 4,5,6 keep nothing.
func TestMoveCancelledRollsBack(t *testing.T) {
	c, w, chk := startMoveCell(t)
	c.apply(move1to4)
	// The leader reports the joiner: the first non-voter in its
	// configuration, how far behind it is.
	celltest.WaitFor(t, moveWait, "the leader reporting a joining non-voter", func() bool {
		st, ok := c.leaderStatus()
		return ok && len(st.Joining) > 0 && slices.Contains(st.Nonvoters, st.Joining[0].Node)
	})
	// The control plane's cancel: the old set is the target again.
	c.apply(wire.Partition{Partition: 0, Replicas: []int{1, 2, 3, 4, 5, 6}, Removing: []int{4, 5, 6}})
	c.waitVoters(moveWait, 1, 2, 3)
	c.apply(from123)
	c.waitGone(moveWait, 4, 5, 6)
	for _, n := range []int{1, 2, 3} {
		if !c.hasDir(n) {
			t.Errorf("node %d lost its replica directory", n)
		}
	}
	finish(t, c, w, chk)
}

// TestMoveBackOntoFormerBrokers: 1,2,3 → 4,5,6 → 1,2,3. The second move's
// joiners are brokers the group's history names as voters (its first
// entries and, after DeleteRecords and a checkpoint, the snapshots the
// leader seeds them from): they must not campaign or vote with those
// configurations, and the move must complete.
func TestMoveBackOntoFormerBrokers(t *testing.T) {
	c, w, chk := startMoveCell(t)
	c.apply(move1to4)
	c.waitVoters(moveWait, 4, 5, 6)
	c.apply(to456)
	c.waitGone(moveWait, 1, 2, 3)
	waitAcks(t, w, 50)

	// Make the leader unable to send its first entries: the joiners are
	// seeded from its snapshot and segments. Leadership may still be on
	// its way to the preferred replica (4): a replica transferring it
	// refuses, and the next leader is asked.
	ctx, cancel := context.WithTimeout(context.Background(), moveWait)
	defer cancel()
	celltest.WaitFor(t, moveWait, "DeleteRecords on the serving leader of 4,5,6", func() bool {
		b := c.Leader(0)
		if b < 0 {
			return false
		}
		r := c.Replica(b, 0)
		to := r.HighWatermark() - 5
		chk.MayTrim(0, to)
		_, err := r.DeleteRecords(ctx, to)
		if errors.Is(err, partition.ErrNotLeader) {
			return false
		}
		if err != nil {
			t.Fatalf("delete records: %v", err)
		}
		return true
	})
	for _, n := range []int{4, 5, 6} {
		if rr := c.Replica(n-1, 0); rr != nil {
			if err := rr.RetentionPass(ctx, 5*time.Second); err != nil {
				t.Logf("node %d retention pass: %v", n, err)
			}
		}
	}

	began := time.Now()
	w.ResetAckGap()
	c.apply(move4to1)
	c.waitVoters(moveWait, 1, 2, 3)
	t.Logf("move back: configuration at 1,2,3 after %v; longest gap between acknowledged produces %v", time.Since(began), w.MaxAckGap())
	c.apply(from123)
	c.waitGone(moveWait, 4, 5, 6)
	finish(t, c, w, chk)
}

// TestLeavingReplicaNeverToldOfItsRemoval: the leaving broker is cut off
// when the leader removes it, so the removal never reaches it and its
// configuration still names it a voter; once it reaches the others again,
// they refuse it as a member and it deletes its data; while it cannot
// tell, it keeps it.
func TestLeavingReplicaNeverToldOfItsRemoval(t *testing.T) {
	c, w, chk := startMoveCell(t)
	leave := 3 // a follower: the leader does not remove itself
	if c.Leader(0)+1 == leave {
		leave = 2
	}
	var stay []int
	for _, n := range []int{1, 2, 3} {
		if n != leave {
			stay = append(stay, n)
		}
	}
	target := append(slices.Clone(stay), 4)
	c.apply(wire.Partition{Partition: 0, Replicas: append(slices.Clone(target), leave), Adding: []int{4}, Removing: []int{leave}})
	celltest.WaitFor(t, moveWait, "node 4 promoted", func() bool {
		v, _, ok := c.membership()
		return ok && slices.Contains(v, 4)
	})
	c.faults.Isolate(strconv.Itoa(leave))
	c.waitVoters(moveWait, target...)
	c.apply(wire.Partition{Partition: 0, Replicas: target})
	st, ok := c.status(leave)
	if !ok || !slices.Contains(st.Voters, leave) {
		t.Fatalf("node %d, cut off, reports %+v (open %v); want itself a voter still", leave, st, ok)
	}
	waitAcks(t, w, 20) // time passes; the cut-off node keeps its data meanwhile
	if !c.hasDir(leave) {
		t.Fatalf("node %d deleted its data while it could not tell whether it is still a voter", leave)
	}
	c.faults.Heal()
	c.waitGone(moveWait, leave)
	finish(t, c, w, chk)
}

// TestOffsetsPlacedByCellState: once the cell state carries the offsets
// partitions' placement, the manager opens those instead of computing
// OffsetsPlacement's, and OffsetsReplicas tells either placement.
func TestOffsetsPlacedByCellState(t *testing.T) {
	tn, com := nodeDeps(t, 1)
	m, err := replicas.New(replicas.Config{NodeID: 1, DataDir: t.TempDir(), Transport: tn, Committer: com,
		Raft: celltest.TestRaftConfig, OffsetsPartitions: 3, OffsetsReplicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	brokers := []wire.Broker{{ID: "b1", NodeID: 1, RaftAddr: string(tn.Addr())}, {ID: "b2", NodeID: 2, RaftAddr: "127.0.0.1:1"}, {ID: "b3", NodeID: 3, RaftAddr: "127.0.0.1:2"}}
	ctx := context.Background()
	if got := m.OffsetsReplicas(0); got != nil {
		t.Errorf("offsets partition 0 placed on %v before any state", got)
	}
	if err := m.Apply(ctx, viewOf(t, wire.CellState{StateVersion: 1, Brokers: brokers})); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if _, ok := m.Get(groups.OffsetsTopicID, p); !ok {
			t.Errorf("offsets partition %d of the default placement not opened", p)
		}
		want := []int{1, 2, 3}[p:]
		want = append(want, []int{1, 2, 3}[:p]...) // rotated by partition
		if got := m.OffsetsReplicas(p); !slices.Equal(got, want) {
			t.Errorf("offsets partition %d placed on %v, want %v", p, got, want)
		}
	}
	st := wire.CellState{StateVersion: 2, Brokers: brokers, Offsets: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}, {Partition: 1, Replicas: []int{2, 3, 1}}}}
	if err := m.Apply(ctx, viewOf(t, st)); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if _, ok := m.Get(groups.OffsetsTopicID, p); !ok {
			t.Errorf("offsets partition %d of the cell state not opened", p)
		}
	}
	if _, ok := m.Get(groups.OffsetsTopicID, 2); ok {
		t.Error("an offsets partition the cell state does not place is still open")
	}
	if got := m.OffsetsReplicas(1); !slices.Equal(got, []int{2, 3, 1}) {
		t.Errorf("offsets partition 1 placed on %v, want the cell state's [2 3 1]", got)
	}
	if got := m.OffsetsReplicas(2); got != nil {
		t.Errorf("offsets partition 2, which the cell state does not place, placed on %v", got)
	}
}
