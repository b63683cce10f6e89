package controlplane_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestMoveBadInput: every refusal of a move, a drain or a cancel has its
// own code and message, and changes nothing: no move, the same replicas,
// the same cell state version, no broker status changed.
func TestMoveBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := &moveCell{env: e, tn: e.signup("mover")}
	m.topic = e.createTopic(m.tn, "orders", 2)
	m.cell = e.cellClient()
	orig := m.replicas(m.topic, 0)
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b4", CellID: "cell-1", NodeID: 4}))
	e.must(e.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "other", Kind: "shared"}))
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "other"}))
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-2-b7", CellID: "cell-2", NodeID: 7}))
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b6", CellID: "cell-1", NodeID: 6}))
	off := "offline"
	e.must(e.op.AdminUpdateBroker(ctx, "cell-1-b6", api.UpdateBrokerRequest{Status: &off}))

	good := func(replicas ...int) api.CreateMoveRequest {
		return api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: replicas}
	}
	type refusal struct {
		name string
		call func() error
		code string
		msg  string
	}
	move := func(req api.CreateMoveRequest) func() error {
		return func() error { _, err := e.op.AdminCreateMove(ctx, req); return err }
	}
	drain := func(broker string) func() error {
		return func() error { _, err := e.op.AdminDrainBroker(ctx, broker); return err }
	}
	// check runs the refusals, then asserts that the cell still has
	// unfinished moves, the same replicas and the same state version.
	check := func(unfinished int, cases []refusal) {
		t.Helper()
		v0, _ := m.published(m.topic, 0)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				if !client.IsCode(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
				}
			})
		}
		var moves int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM partition_moves WHERE state IN ('running', 'cancelling')`).Scan(&moves); err != nil {
			t.Fatal(err)
		}
		if v1, _ := m.published(m.topic, 0); v1 != v0 || moves != unfinished {
			t.Fatalf("refusals changed something: state version %d (was %d), %d unfinished moves (want %d)", v1, v0, moves, unfinished)
		}
		if r := m.replicas(m.topic, 0); !slices.Equal(r, orig) {
			t.Fatalf("refusals changed the replicas to %v from %v", r, orig)
		}
		var taken int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM offsets_placements`).Scan(&taken); err != nil || taken != 0 {
			t.Fatalf("refusals took an offsets placement over: %d rows, %v", taken, err)
		}
		for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4"} {
			if st := m.brokerStatus(b); st != "active" {
				t.Fatalf("refusals left broker %s %s", b, st)
			}
		}
	}

	// Before the brokers report: the cell has no live brokers.
	check(0, []refusal{
		{"no live brokers", move(good(orig[0], orig[1], 4)), "not_enough_replicas", "0 live brokers"},
		{"drain with no live brokers", drain("cell-1-b1"), "not_enough_replicas", "0 live brokers"},
	})
	m.heartbeat("cell-1-b1", "cell-1-b2")
	check(0, []refusal{
		{"two live brokers", move(good(orig[0], orig[1], 4)), "not_enough_replicas", "2 live brokers"},
		{"drain with two live brokers", drain("cell-1-b1"), "not_enough_replicas", "2 live brokers"},
	})
	// A broker whose report lacks the Raft configuration would ignore a move.
	m.report("cell-1-b3", wire.PartitionStatus{TopicID: m.topic, Partition: 0, LeaderNode: orig[0]})
	check(0, []refusal{
		{"a broker without moves", move(good(orig[0], orig[1], 4)), "unavailable", "cell-1-b3 of cell cell-1 does not report"},
	})
	check(0, []refusal{
		{"a drain with a broker without moves", drain("cell-1-b1"), "unavailable", "cell-1-b3 of cell cell-1 does not report"},
	})
	m.heartbeat("cell-1-b3", "cell-1-b4")

	check(0, []refusal{
		{"unknown topic", move(api.CreateMoveRequest{TopicID: "tp_nope", Partition: 0, Replicas: []int{1, 2, 4}}), "topic_not_found", `no topic has id "tp_nope"`},
		{"no topic", move(api.CreateMoveRequest{Partition: 0, Replicas: []int{1, 2, 4}}), "invalid_request", "topic_id is required"},
		{"unknown partition", move(api.CreateMoveRequest{TopicID: m.topic, Partition: 2, Replicas: []int{1, 2, 4}}), "not_found", "it has no partition 2"},
		{"negative partition", move(api.CreateMoveRequest{TopicID: m.topic, Partition: -1, Replicas: []int{1, 2, 4}}), "invalid_request", "numbered from 0"},
		{"too few", move(good(orig[0], 4)), "invalid_replication_factor", "name exactly 3 broker node ids, not 2"},
		{"too many", move(good(1, 2, 3, 4)), "invalid_replication_factor", "not 4"},
		{"none", move(good()), "invalid_replication_factor", "not 0"},
		{"duplicate", move(good(4, 4, orig[0])), "invalid_request", "names node 4 twice"},
		{"unchanged", move(good(orig...)), "invalid_request", "already has replicas"},
		{"unknown node", move(good(orig[0], orig[1], 9)), "invalid_request", "node 9 is not a broker of cell cell-1"},
		{"another cell's broker", move(good(orig[0], orig[1], 7)), "invalid_request", "node 7 is not a broker of cell cell-1"},
		{"offline broker", move(good(orig[0], orig[1], 6)), "invalid_request", "broker cell-1-b6 (node 6) is offline"},
		{"topic on another cell", move(api.CreateMoveRequest{CellID: "cell-2", TopicID: m.topic, Partition: 0, Replicas: []int{1, 2, 4}}), "invalid_request", "is on cell cell-1, not cell-2"},
		{"offsets without cell", move(api.CreateMoveRequest{TopicID: "__offsets", Partition: 0, Replicas: []int{1, 2, 4}}), "invalid_request", "cell_id is required"},
		{"offsets of no cell", move(api.CreateMoveRequest{CellID: "cell-9", TopicID: "__offsets", Partition: 0, Replicas: []int{1, 2, 4}}), "not_found", "no such cell"},
		{"offsets of a small cell", move(api.CreateMoveRequest{CellID: "cell-2", TopicID: "__offsets", Partition: 0, Replicas: []int{7}}), "not_found", "fewer than 3 brokers"},
		{"unknown offsets partition", move(api.CreateMoveRequest{CellID: "cell-1", TopicID: "__offsets", Partition: 8, Replicas: []int{1, 2, 4}}), "not_found", "offsets partitions 0 to 7; it has no partition 8"},
		{"offsets too few", move(api.CreateMoveRequest{CellID: "cell-1", TopicID: "__offsets", Partition: 0, Replicas: []int{1, 4}}), "invalid_replication_factor", "not 2"},
		{"cancel unknown", func() error { _, err := e.op.AdminCancelMove(ctx, 999); return err }, "not_found", "no such move"},
		{"get unknown", func() error { _, err := e.op.AdminMove(ctx, 999); return err }, "not_found", "no such move"},
		{"list bad state", func() error { _, err := e.op.AdminMoves(ctx, client.MoveFilter{State: "done"}); return err }, "invalid_request", `state "done"`},
		{"list unknown broker", func() error { _, err := e.op.AdminMoves(ctx, client.MoveFilter{Broker: "nope"}); return err }, "not_found", `no such broker "nope"`},
		{"drain unknown broker", func() error { _, err := e.op.AdminDrainBroker(ctx, "nope"); return err }, "not_found", "no such broker"},
		{"tenant key", func() error {
			_, err := m.tn.key.AdminCreateMove(ctx, good(orig[0], orig[1], 4))
			return err
		}, "permission_denied", "platform operators"},
	})

	// One move may run; a second of the same partition, or a drain that
	// would need one, is refused.
	mv, err := e.op.AdminCreateMove(ctx, good(orig[0], orig[1], 4))
	if err != nil {
		t.Fatal(err)
	}
	check(1, []refusal{
		{"second move", move(good(4, orig[1], orig[2])), "already_exists", "already has move"},
		{"drain a broker the move keeps", func() error { _, err := e.op.AdminDrainBroker(ctx, "cell-1-b4"); return err }, "already_exists", "unfinished move"},
	})
	if got := m.move(mv.ID); got.State != "running" {
		t.Fatalf("the move after the refusals: %+v", got)
	}
}
