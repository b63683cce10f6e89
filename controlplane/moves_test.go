package controlplane_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// moveCell is a control plane with a tenant's topic on cell-1, a fourth
// broker (node 4) that joined after the topic was placed, and a cell key
// to report as the brokers do.
type moveCell struct {
	*env
	cell  *client.Client
	tn    *tenant
	topic string
}

func newMoveCell(t *testing.T, partitions int) *moveCell {
	e := newEnv(t)
	m := &moveCell{env: e, tn: e.signup("mover")}
	m.topic = e.createTopic(m.tn, "orders", partitions)
	e.must(e.op.AdminCreateBroker(context.Background(), api.CreateBrokerRequest{ID: "cell-1-b4", CellID: "cell-1", NodeID: 4}))
	m.cell = e.cellClient()
	m.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4")
	return m
}

// report posts one broker's report through cell.
func (m *moveCell) reportTo(cell *client.Client, broker string, parts ...wire.PartitionStatus) error {
	if parts == nil {
		parts = []wire.PartitionStatus{}
	}
	return cell.CellReport(context.Background(), "cell-1", wire.Report{Version: wire.Version, BrokerID: broker, Partitions: parts})
}

func (m *moveCell) report(broker string, parts ...wire.PartitionStatus) {
	m.t.Helper()
	if err := m.reportTo(m.cell, broker, parts...); err != nil {
		m.t.Fatalf("report of %s: %v", broker, err)
	}
}

// heartbeat reports each broker alive, holding nothing.
func (m *moveCell) heartbeat(brokers ...string) {
	m.t.Helper()
	for _, b := range brokers {
		m.report(b)
	}
}

// status is a replica's report of partition part of topic, led by leader,
// with its Raft configuration.
func status(topic string, part, leader int, voters, nonvoters []int, joining ...wire.JoinStatus) wire.PartitionStatus {
	return wire.PartitionStatus{TopicID: topic, Partition: part, LeaderNode: leader, LeaderEpoch: 2, Voters: voters,
		Nonvoters: nonvoters, Joining: joining}
}

// replicas is partitions.replicas of the topic's partition.
func (m *moveCell) replicas(topic string, part int) []int {
	m.t.Helper()
	var r []int
	if err := m.db.QueryRow(context.Background(), `SELECT replicas FROM partitions WHERE topic_id = $1 AND partition = $2`,
		topic, part).Scan(&r); err != nil {
		m.t.Fatal(err)
	}
	return r
}

// published is the cell state's version and its entry for the partition.
func (m *moveCell) published(topic string, part int) (int64, wire.Partition) {
	m.t.Helper()
	st, _, err := m.cell.CellState(context.Background(), "cell-1", -1, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, x := range st.Topics {
		if x.ID == topic {
			for _, p := range x.Partitions {
				if p.Partition == part {
					return st.StateVersion, p
				}
			}
		}
	}
	m.t.Fatalf("partition %d of %s not in the cell state", part, topic)
	return 0, wire.Partition{}
}

func (m *moveCell) move(id int64) api.Move {
	m.t.Helper()
	mv, err := m.op.AdminMove(context.Background(), id)
	if err != nil {
		m.t.Fatal(err)
	}
	return mv
}

func wantPublished(t *testing.T, got wire.Partition, replicas, adding, removing []int) {
	t.Helper()
	if !slices.Equal(got.Replicas, replicas) || !slices.Equal(got.Adding, adding) || !slices.Equal(got.Removing, removing) {
		t.Fatalf("published %+v, want replicas %v adding %v removing %v", got, replicas, adding, removing)
	}
}

// TestMoveCompletesFromReports: a move publishes the union of the old and
// new replicas with adding and removing, its progress (bytes remaining,
// rate, ETA) follows the leader's reports, a follower's report never
// completes it, and the leader's report of voters = target with no
// non-voters does: partitions.replicas becomes the target and the cell
// state clears the move.
func TestMoveCompletesFromReports(t *testing.T) {
	m := newMoveCell(t, 1)
	ctx := context.Background()
	orig := m.replicas(m.topic, 0)
	target := []int{orig[0], orig[1], 4}
	v0, _ := m.published(m.topic, 0)
	mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target})
	if err != nil {
		t.Fatal(err)
	}
	if mv.State != "running" || !slices.Equal(mv.Original, orig) || !slices.Equal(mv.Target, target) || mv.Topic != "orders" ||
		mv.TenantID != m.tn.Tenant.ID || !strings.HasPrefix(mv.CreatedBy, "key:") || mv.ETASeconds != nil {
		t.Fatalf("new move %+v", mv)
	}
	v1, p := m.published(m.topic, 0)
	if v1 <= v0 {
		t.Fatalf("state version %d after the move, was %d", v1, v0)
	}
	wantPublished(t, p, []int{orig[0], orig[1], 4, orig[2]}, []int{4}, []int{orig[2]})
	if got := p.Target(); !slices.Equal(got, target) {
		t.Fatalf("published target %v, want %v", got, target)
	}
	if r := m.replicas(m.topic, 0); !slices.Equal(r, orig) {
		t.Fatalf("partitions.replicas %v during the move, want the original %v", r, orig)
	}

	leader := fmt.Sprintf("cell-1-b%d", orig[0])
	m.report(leader, status(m.topic, 0, orig[0], orig, []int{4}, wire.JoinStatus{Node: 4, BytesBehind: 1000, EntriesBehind: 10}))
	got := m.move(mv.ID)
	if got.BytesRemaining != 1000 || got.ETASeconds != nil || len(got.Joining) != 1 || got.Joining[0].EntriesBehind != 10 ||
		!slices.Equal(got.Nonvoters, []int{4}) {
		t.Fatalf("after the first progress report: %+v", got)
	}
	m.now.Advance(10 * time.Second)
	m.report(leader, status(m.topic, 0, orig[0], orig, []int{4}, wire.JoinStatus{Node: 4, BytesBehind: 400, EntriesBehind: 4}))
	got = m.move(mv.ID)
	if got.BytesRemaining != 400 || math.Abs(got.BytesPerSec-60) > 1e-9 || got.ETASeconds == nil || math.Abs(*got.ETASeconds-400.0/60) > 1e-9 {
		t.Fatalf("after 600 bytes in 10 s: %+v (eta %v)", got, got.ETASeconds)
	}

	// A follower that already holds the target configuration is not the
	// leader: nothing finishes.
	follower := fmt.Sprintf("cell-1-b%d", orig[1])
	m.report(follower, status(m.topic, 0, orig[0], target, nil))
	if got := m.move(mv.ID); got.State != "running" {
		t.Fatalf("a follower's report finished the move: %+v", got)
	}
	// Promoted but the old replica not yet removed: still running.
	m.report(leader, status(m.topic, 0, orig[0], append(slices.Clone(orig), 4), nil))
	if got := m.move(mv.ID); got.State != "running" {
		t.Fatalf("voters %v finished the move to %v", got.Voters, target)
	}

	v2, _ := m.published(m.topic, 0)
	m.report(leader, status(m.topic, 0, orig[0], []int{4, orig[1], orig[0]}, nil))
	got = m.move(mv.ID)
	if got.State != "completed" || got.FinishedAt == nil || got.Adding != nil || got.Replicas != nil || got.BytesRemaining != 0 {
		t.Fatalf("after the leader reported the target: %+v", got)
	}
	if r := m.replicas(m.topic, 0); !slices.Equal(r, target) {
		t.Fatalf("partitions.replicas %v after completion, want %v", r, target)
	}
	v3, p := m.published(m.topic, 0)
	if v3 <= v2 {
		t.Fatalf("completion did not bump the state version (%d, was %d)", v3, v2)
	}
	wantPublished(t, p, target, nil, nil)
	// Reports after completion change nothing.
	m.report(leader, status(m.topic, 0, orig[0], target, nil))
	if v4, _ := m.published(m.topic, 0); v4 != v3 {
		t.Fatalf("a report after completion bumped the state version to %d from %d", v4, v3)
	}
	var audits int
	if err := m.db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action IN ('move.create', 'move.completed') AND target = $1`,
		fmt.Sprint(mv.ID)).Scan(&audits); err != nil || audits != 2 {
		t.Fatalf("audit rows for the move: %d, %v", audits, err)
	}
}

// TestMoveCancelRollsBack: a cancelled move converges back to the
// original replicas: it publishes the original first, removes what was
// added, re-adds an original broker the leader had already dropped, and
// is cancelled once the leader reports the original voters; a finished
// move cannot be cancelled.
func TestMoveCancelRollsBack(t *testing.T) {
	m := newMoveCell(t, 1)
	ctx := context.Background()
	orig := m.replicas(m.topic, 0)
	target := []int{4, orig[1], orig[2]}
	mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target})
	if err != nil {
		t.Fatal(err)
	}
	leader := fmt.Sprintf("cell-1-b%d", orig[1])
	// Node 4 promoted; the old leader orig[0] handed leadership over.
	m.report(leader, status(m.topic, 0, orig[1], append(slices.Clone(orig), 4), nil))

	got, err := m.op.AdminCancelMove(ctx, mv.ID)
	if err != nil || got.State != "cancelling" {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	_, p := m.published(m.topic, 0)
	wantPublished(t, p, append(slices.Clone(orig), 4), nil, []int{4})
	if again, err := m.op.AdminCancelMove(ctx, mv.ID); err != nil || again.State != "cancelling" {
		t.Fatalf("cancel a cancelling move: %+v, %v", again, err)
	}

	// The leader had removed orig[0] meanwhile: it is published as adding.
	v1, _ := m.published(m.topic, 0)
	m.report(leader, status(m.topic, 0, orig[1], target, nil))
	v2, p := m.published(m.topic, 0)
	if v2 <= v1 {
		t.Fatalf("a dropped original voter did not bump the state (%d, was %d)", v2, v1)
	}
	wantPublished(t, p, append(slices.Clone(orig), 4), []int{orig[0]}, []int{4})
	if got := m.move(mv.ID); got.State != "cancelling" {
		t.Fatalf("voters = the target finished a cancelling move: %+v", got)
	}

	m.report(leader, status(m.topic, 0, orig[1], []int{orig[2], orig[0], orig[1]}, nil))
	got = m.move(mv.ID)
	if got.State != "cancelled" || got.FinishedAt == nil {
		t.Fatalf("after the leader reported the original voters: %+v", got)
	}
	if r := m.replicas(m.topic, 0); !slices.Equal(r, orig) {
		t.Fatalf("partitions.replicas %v after the rollback, want %v", r, orig)
	}
	_, p = m.published(m.topic, 0)
	wantPublished(t, p, orig, nil, nil)
	if _, err := m.op.AdminCancelMove(ctx, mv.ID); !client.IsCode(err, "invalid_request") || !strings.Contains(err.Error(), "is cancelled") {
		t.Fatalf("cancel a cancelled move: %v", err)
	}
	// The partition may move again once the move finished.
	if _, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target}); err != nil {
		t.Fatalf("a new move after the cancelled one: %v", err)
	}
}

// secondServer is another control plane on the same database, as a
// second instance or a restarted one is.
func (m *moveCell) secondServer() *client.Client { return m.cellKeyClient(m.secondURL(), "cell-1") }

// TestMoveResumesAfterRestart: a move lives in Postgres, so a control
// plane started afterwards on the same database publishes it and
// completes it from the brokers' reports.
func TestMoveResumesAfterRestart(t *testing.T) {
	m := newMoveCell(t, 1)
	ctx := context.Background()
	orig := m.replicas(m.topic, 0)
	target := []int{orig[0], 4, orig[2]}
	mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target})
	if err != nil {
		t.Fatal(err)
	}
	other := m.secondServer()
	st, _, err := other.CellState(ctx, "cell-1", -1, 0)
	if err != nil || len(st.Topics) != 1 {
		t.Fatalf("state from the new control plane: %+v, %v", st, err)
	}
	wantPublished(t, st.Topics[0].Partitions[0], []int{orig[0], 4, orig[2], orig[1]}, []int{4}, []int{orig[1]})
	leader := fmt.Sprintf("cell-1-b%d", orig[0])
	if err := m.reportTo(other, leader, status(m.topic, 0, orig[0], target, nil)); err != nil {
		t.Fatal(err)
	}
	if got := m.move(mv.ID); got.State != "completed" {
		t.Fatalf("after the new control plane got the leader's report: %+v", got)
	}
	if r := m.replicas(m.topic, 0); !slices.Equal(r, target) {
		t.Fatalf("partitions.replicas %v, want %v", r, target)
	}
}

// TestTwoControlPlanesOneCompletion: two control planes get reports that
// each finish the same moves at once (two brokers that both believe they
// lead); each move completes exactly once.
func TestTwoControlPlanesOneCompletion(t *testing.T) {
	const parts = 6
	m := newMoveCell(t, parts)
	ctx := context.Background()
	other := m.secondServer()
	var a, b []wire.PartitionStatus
	for p := range parts {
		orig := m.replicas(m.topic, p)
		target := []int{orig[0], orig[1], 4}
		if _, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: p, Replicas: target}); err != nil {
			t.Fatal(err)
		}
		a = append(a, status(m.topic, p, 1, target, nil))
		b = append(b, status(m.topic, p, 2, target, nil))
	}
	v0, _ := m.published(m.topic, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range []struct {
		cell   *client.Client
		broker string
		parts  []wire.PartitionStatus
	}{{m.cell, "cell-1-b1", a}, {other, "cell-1-b2", b}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.reportTo(r.cell, r.broker, r.parts...)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent report: %v", err)
		}
	}
	var completed, audits int
	if err := m.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed') FROM partition_moves`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if err := m.db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'move.completed'`).Scan(&audits); err != nil {
		t.Fatal(err)
	}
	if completed != parts || audits != parts {
		t.Fatalf("%d moves completed with %d completion audits, want %d of each", completed, audits, parts)
	}
	if v1, _ := m.published(m.topic, 0); v1 <= v0 {
		t.Fatalf("state version %d after completion, was %d", v1, v0)
	}
}

// TestMoveOffsetsPartition: an offsets partition moves by cell and topic
// id "__offsets": the control plane takes the cell's offsets placement
// over from exactly the brokers' own, publishes it, and completes the
// move from the leader's report of that partition.
func TestMoveOffsetsPartition(t *testing.T) {
	m := newMoveCell(t, 1)
	ctx := context.Background()
	mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{CellID: "cell-1", TopicID: "__offsets", Partition: 1, Replicas: []int{2, 4, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mv.Original, []int{2, 3, 1}) || mv.Topic != "__offsets" || mv.TenantID != "" {
		t.Fatalf("offsets move %+v", mv)
	}
	offsets := func() []wire.Partition {
		st, _, err := m.cell.CellState(ctx, "cell-1", -1, 0)
		if err != nil || len(st.Offsets) != 8 {
			t.Fatalf("offsets placement: %+v, %v", st.Offsets, err)
		}
		return st.Offsets
	}
	for i, o := range offsets() {
		want := []int{1 + i%3, 1 + (i+1)%3, 1 + (i+2)%3}
		if i == 1 {
			wantPublished(t, o, []int{2, 4, 1, 3}, []int{4}, []int{3})
		} else if !slices.Equal(o.Replicas, want) || o.Adding != nil {
			t.Fatalf("offsets partition %d published as %+v, want replicas %v", i, o, want)
		}
	}
	m.report("cell-1-b2", status("__offsets", 1, 2, []int{1, 2, 4}, nil))
	if got := m.move(mv.ID); got.State != "completed" {
		t.Fatalf("after the leader reported the target: %+v", got)
	}
	wantPublished(t, offsets()[1], []int{2, 4, 1}, nil, nil)
	// Node 4 holds no topic partition, only the moved offsets partition.
	if err := m.op.AdminDeleteBroker(ctx, "cell-1-b4"); !client.IsCode(err, "invalid_request") || !strings.Contains(err.Error(), "offsets partition 1") {
		t.Fatalf("delete node 4, which holds offsets partition 1: %v", err)
	}
}
