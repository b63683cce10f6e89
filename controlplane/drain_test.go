package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// completeRunning finishes every running move as its brokers would: the
// target's first broker leads and reports the target as its voters.
func (m *moveCell) completeRunning() {
	m.t.Helper()
	moves, err := m.op.AdminMoves(context.Background(), client.MoveFilter{State: "running"})
	if err != nil {
		m.t.Fatal(err)
	}
	for _, mv := range moves {
		leader := mv.Target[0]
		m.report(fmt.Sprintf("cell-1-b%d", leader), status(mv.TopicID, mv.Partition, leader, mv.Target, nil))
	}
	if left, err := m.op.AdminMoves(context.Background(), client.MoveFilter{State: "running"}); err != nil || len(left) != 0 {
		m.t.Fatalf("running moves after their leaders reported the targets: %+v, %v", left, err)
	}
}

// holding is the partitions of the cell, topic and offsets partitions,
// whose replicas list node.
func (m *moveCell) holding(node int) int {
	m.t.Helper()
	var n int
	if err := m.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM partitions WHERE cell_id = 'cell-1' AND $1 = ANY(replicas))
		+ (SELECT count(*) FROM offsets_placements WHERE cell_id = 'cell-1' AND $1 = ANY(replicas))`,
		node).Scan(&n); err != nil {
		m.t.Fatal(err)
	}
	return n
}

// TestDrainMovesEveryReplica: draining a broker sets it draining and
// starts one move per partition it holds, each replacing it by the active
// broker with the fewest replicas; placement skips it; once the moves
// complete it holds nothing. The offsets partitions move too: the drain
// takes their placement over from exactly the brokers' own and publishes
// it. A broker that holds replicas, or that an unfinished move puts a
// replica on, cannot be deleted; a drained one can; a drain that no
// active broker could take over is refused with nothing changed.
func TestDrainMovesEveryReplica(t *testing.T) {
	const parts = 6
	m := newMoveCell(t, parts)
	ctx := context.Background()
	m.must(m.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b5", CellID: "cell-1", NodeID: 5}))
	m.heartbeat("cell-1-b5")

	st, _, err := m.cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil || st.Offsets != nil {
		t.Fatalf("offsets placement published before any drain: %+v, %v", st.Offsets, err)
	}
	d, err := m.op.AdminDrainBroker(ctx, "cell-1-b3")
	if err != nil {
		t.Fatal(err)
	}
	// Every topic partition and every offsets partition lists node 3.
	if d.Broker.Status != "draining" || len(d.Moves) != parts+offsetsPartitions {
		t.Fatalf("drain: broker %+v with %d moves, want draining with %d", d.Broker, len(d.Moves), parts+offsetsPartitions)
	}
	to := map[int]int{}
	offsets := 0
	for _, mv := range d.Moves {
		i := slices.Index(mv.Original, 3)
		if i < 0 || mv.State != "running" || mv.Reason != "drain of broker cell-1-b3" || slices.Contains(mv.Target, 3) {
			t.Fatalf("drain move %+v", mv)
		}
		inPlace := slices.Clone(mv.Original)
		inPlace[i] = mv.Target[i]
		if !slices.Equal(inPlace, mv.Target) {
			t.Fatalf("move %d: target %v is not the original %v with node 3 replaced in place", mv.ID, mv.Target, mv.Original)
		}
		if mv.TopicID == "__offsets" {
			// The control plane took over exactly the brokers' placement:
			// the three lowest node ids, rotated by partition.
			if want := []int{1 + mv.Partition%3, 1 + (mv.Partition+1)%3, 1 + (mv.Partition+2)%3}; !slices.Equal(mv.Original, want) {
				t.Fatalf("offsets partition %d taken over as %v, want %v", mv.Partition, mv.Original, want)
			}
			offsets++
		}
		to[mv.Target[i]]++
	}
	if offsets != offsetsPartitions || to[4] != len(d.Moves)/2 || to[5] != len(d.Moves)/2 {
		t.Fatalf("%d offsets moves; node 3's replicas went to %v, want half each to nodes 4 and 5", offsets, to)
	}
	st, _, err = m.cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil || len(st.Offsets) != offsetsPartitions {
		t.Fatalf("offsets placement after the drain: %+v, %v", st.Offsets, err)
	}
	for _, o := range st.Offsets {
		if len(o.Adding) != 1 || !slices.Equal(o.Removing, []int{3}) || slices.Contains(o.Target(), 3) || len(o.Replicas) != 4 {
			t.Fatalf("offsets partition published as %+v", o)
		}
	}
	if listed, err := m.op.AdminMoves(ctx, client.MoveFilter{Broker: "cell-1-b3", State: "running", Cell: "cell-1"}); err != nil || len(listed) != len(d.Moves) {
		t.Fatalf("moves of broker cell-1-b3: %d, %v", len(listed), err)
	}
	// A new topic is placed on active brokers only.
	m.createTopic(m.tn, "later", 4)
	later := topicID(t, m.env, m.tn.Tenant.ID, "later")
	for p := range 4 {
		if r := m.replicas(later, p); slices.Contains(r, 3) {
			t.Fatalf("partition %d of a topic created during the drain placed on the draining node 3: %v", p, r)
		}
	}
	wantCode(t, m.op.AdminDeleteBroker(ctx, "cell-1-b3"), "invalid_request")

	m.completeRunning()
	if n := m.holding(3); n != 0 {
		t.Fatalf("node 3 holds %d partitions after its drain completed", n)
	}
	st, _, err = m.cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range st.Offsets {
		if slices.Contains(o.Replicas, 3) || o.Adding != nil || o.Removing != nil {
			t.Fatalf("offsets partition after the drain completed: %+v", o)
		}
	}
	if err := m.op.AdminDeleteBroker(ctx, "cell-1-b3"); err != nil {
		t.Fatalf("delete drained node 3: %v", err)
	}

	// Node 5 can go: its replicas move to the one active broker each
	// partition lacks.
	d, err = m.op.AdminDrainBroker(ctx, "cell-1-b5")
	if err != nil {
		t.Fatal(err)
	}
	if want := m.holding(5); len(d.Moves) != want || want == 0 {
		t.Fatalf("drain of node 5 made %d moves; it holds %d partitions", len(d.Moves), want)
	}
	for _, mv := range d.Moves {
		if slices.Contains(mv.Target, 5) || slices.Contains(mv.Target, 3) {
			t.Fatalf("drain of node 5: move %+v", mv)
		}
	}
	wantCode(t, m.op.AdminDeleteBroker(ctx, "cell-1-b5"), "invalid_request")
	if err := m.op.AdminDeleteBroker(ctx, "cell-1-b4"); !client.IsCode(err, "invalid_request") {
		t.Fatalf("delete node 4 while moves put replicas on it: %v", err)
	}
	m.completeRunning()
	if err := m.op.AdminDeleteBroker(ctx, "cell-1-b5"); err != nil {
		t.Fatalf("delete drained node 5: %v", err)
	}

	// Draining node 4 now would leave partitions on 1, 2, 4 without a
	// broker to take node 4's replica: refused, nothing changed.
	before, err := m.op.AdminMoves(ctx, client.MoveFilter{})
	if err != nil {
		t.Fatal(err)
	}
	v0, _ := m.published(m.topic, 0)
	if _, err := m.op.AdminDrainBroker(ctx, "cell-1-b4"); !client.IsCode(err, "invalid_request") || !strings.Contains(err.Error(), "no active broker") {
		t.Fatalf("drain of the last broker that could hold a replica: %v", err)
	}
	after, err := m.op.AdminMoves(ctx, client.MoveFilter{})
	if err != nil || len(after) != len(before) {
		t.Fatalf("a refused drain changed the moves: %d before, %d after (%v)", len(before), len(after), err)
	}
	if b := m.brokerStatus("cell-1-b4"); b != "active" {
		t.Fatalf("a refused drain left node 4 %s", b)
	}
	if v1, _ := m.published(m.topic, 0); v1 != v0 {
		t.Fatalf("a refused drain bumped the state version to %d from %d", v1, v0)
	}
	// A report of a partition deleted since (a broker's stale view) is
	// skipped, as for any report.
	m.report("cell-1-b4", wire.PartitionStatus{TopicID: "tp_gone", Partition: 0, LeaderNode: 4, Voters: []int{4}})
}

// offsetsPartitions is the control plane's default offsets partition
// count, the brokers' (groups.DefaultPartitions).
const offsetsPartitions = 8

func (m *moveCell) brokerStatus(id string) string {
	m.t.Helper()
	var st string
	if err := m.db.QueryRow(context.Background(), `SELECT status FROM brokers WHERE id = $1`, id).Scan(&st); err != nil {
		m.t.Fatal(err)
	}
	return st
}
