package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestMoveFails: a running move fails, with its reason in
// /v1/admin/moves/{id}, when a new replica's broker is taken out of
// service (offline, draining), has been silent too long, or no leader of
// the partition has reported too long. A failed move stays published as
// running, keeps a second move of its partition out, is not failed twice,
// and a cancel rolls it back; one whose cause cleared completes from the
// leader's report.
func TestMoveFails(t *testing.T) {
	ctx := context.Background()
	type failCase struct {
		name  string
		cause func(m *moveCell) // makes the move fail
		why   string
	}
	for _, tc := range []failCase{
		{"new replica offline", func(m *moveCell) {
			off := "offline"
			m.must(m.op.AdminUpdateBroker(ctx, "cell-1-b4", api.UpdateBrokerRequest{Status: &off}))
			m.heartbeat("cell-1-b1")
		}, "broker cell-1-b4 (node 4), a new replica, is offline"},
		{"new replica draining", func(m *moveCell) {
			st := "draining"
			m.must(m.op.AdminUpdateBroker(ctx, "cell-1-b4", api.UpdateBrokerRequest{Status: &st}))
			m.heartbeat("cell-1-b2")
		}, "broker cell-1-b4 (node 4), a new replica, is draining"},
		{"new replica silent", func(m *moveCell) {
			m.now.Advance(3 * time.Minute)
			m.heartbeat("cell-1-b1")
		}, "broker cell-1-b4 (node 4), a new replica, has not reported for more than 2m0s"},
		{"no leader report", func(m *moveCell) {
			m.now.Advance(3 * time.Minute)
			m.heartbeat("cell-1-b4") // the new replica's broker itself reports, the leader does not
		}, "no leader of the partition has reported for more than 2m0s (its replicas may have lost their majority)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMoveCell(t, 1)
			orig := m.replicas(m.topic, 0)
			target := []int{orig[0], orig[1], 4}
			leader := fmt.Sprintf("cell-1-b%d", orig[0])
			mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target})
			if err != nil {
				t.Fatal(err)
			}
			m.report(leader, status(m.topic, 0, orig[0], orig, []int{4}))
			_, before := m.published(m.topic, 0)
			if got := m.move(mv.ID); got.State != "running" || got.Failure != "" {
				t.Fatalf("before the cause: %+v", got)
			}

			tc.cause(m)
			got := m.move(mv.ID)
			if got.State != "failed" || got.Failure != tc.why || got.FinishedAt != nil {
				t.Fatalf("after the cause: state %s, failure %q, finished %v; want failed, %q", got.State, got.Failure, got.FinishedAt, tc.why)
			}
			_, after := m.published(m.topic, 0)
			wantPublished(t, after, before.Replicas, before.Adding, before.Removing)
			if _, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: []int{orig[1], orig[0], orig[2]}}); !client.IsCode(err, "already_exists") ||
				!strings.Contains(err.Error(), "(failed)") {
				t.Fatalf("a second move of the failed move's partition: %v", err)
			}
			if ms, err := m.op.AdminMoves(ctx, client.MoveFilter{State: "failed"}); err != nil || len(ms) != 1 || ms[0].ID != mv.ID {
				t.Fatalf("moves listed as failed: %+v, %v", ms, err)
			}
			updated := got.UpdatedAt
			m.heartbeat("cell-1-b3")
			if again := m.move(mv.ID); again.State != "failed" || !again.UpdatedAt.Equal(updated) {
				t.Fatalf("a report after the failure changed it: %+v", again)
			}

			c, err := m.op.AdminCancelMove(ctx, mv.ID)
			if err != nil || c.State != "cancelling" || c.Failure != tc.why {
				t.Fatalf("cancel the failed move: %+v, %v", c, err)
			}
			_, p := m.published(m.topic, 0)
			wantPublished(t, p, append(slices.Clone(orig), 4), nil, []int{4})
			m.report(leader, status(m.topic, 0, orig[0], orig, nil))
			if got := m.move(mv.ID); got.State != "cancelled" || got.FinishedAt == nil {
				t.Fatalf("after the rollback: %+v", got)
			}
			if r := m.replicas(m.topic, 0); !slices.Equal(r, orig) {
				t.Fatalf("replicas %v after the rollback, want %v", r, orig)
			}
		})
	}

	t.Run("completes once its cause clears", func(t *testing.T) {
		m := newMoveCell(t, 1)
		orig := m.replicas(m.topic, 0)
		target := []int{orig[0], orig[1], 4}
		mv, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: target})
		if err != nil {
			t.Fatal(err)
		}
		off, active := "offline", "active"
		m.must(m.op.AdminUpdateBroker(ctx, "cell-1-b4", api.UpdateBrokerRequest{Status: &off}))
		m.heartbeat("cell-1-b1")
		if got := m.move(mv.ID); got.State != "failed" {
			t.Fatalf("with its new broker offline: %+v", got)
		}
		m.must(m.op.AdminUpdateBroker(ctx, "cell-1-b4", api.UpdateBrokerRequest{Status: &active}))
		m.report(fmt.Sprintf("cell-1-b%d", orig[0]), status(m.topic, 0, orig[0], target, nil))
		if got := m.move(mv.ID); got.State != "completed" || got.FinishedAt == nil {
			t.Fatalf("the leader reported the target reached: %+v", got)
		}
		if r := m.replicas(m.topic, 0); !slices.Equal(r, target) {
			t.Fatalf("replicas %v, want %v", r, target)
		}
	})
}

// TestMoveJoinerWithoutConfiguration: a joining replica reports no Raft
// configuration until its leader adds it; that does not make the cell
// refuse further moves, while a replica without one outside any move
// (a broker without replica moves) still does.
func TestMoveJoinerWithoutConfiguration(t *testing.T) {
	ctx := context.Background()
	m := newMoveCell(t, 2)
	o0, o1 := m.replicas(m.topic, 0), m.replicas(m.topic, 1)
	if _, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: []int{o0[0], o0[1], 4}}); err != nil {
		t.Fatal(err)
	}
	next := api.CreateMoveRequest{TopicID: m.topic, Partition: 1, Replicas: []int{o1[0], o1[1], 4}}
	if slices.Contains(o1, 4) {
		t.Fatalf("partition 1 is on %v: want it off node 4", o1)
	}
	// Node 4 also reports partition 1 without a configuration: not a
	// joiner, so the cell is not movable.
	m.report("cell-1-b4", wire.PartitionStatus{TopicID: m.topic, Partition: 0}, wire.PartitionStatus{TopicID: m.topic, Partition: 1})
	if _, err := m.op.AdminCreateMove(ctx, next); !client.IsCode(err, "unavailable") {
		t.Fatalf("a move with a replica reporting no configuration outside any move: %v", err)
	}
	// Only the joining replica lacks one: movable.
	m.report("cell-1-b4", wire.PartitionStatus{TopicID: m.topic, Partition: 0})
	if _, err := m.op.AdminCreateMove(ctx, next); err != nil {
		t.Fatalf("a move while another's joiner has no configuration yet: %v", err)
	}
}
