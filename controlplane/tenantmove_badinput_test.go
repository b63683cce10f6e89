package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestTenantMoveBadInput: every refusal of a tenant move, a cancel, a
// peer CA or a topic change during a move has its own code and message,
// and changes nothing: no move, the same homes, the same state versions
// of both cells, the same peer CAs.
func TestTenantMoveBadInput(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	tid := m.tn.Tenant.ID
	sleeper := m.signup("sleeper")
	suspended := "suspended"
	m.must(m.op.AdminUpdateTenant(ctx, sleeper.Tenant.ID, api.UpdateTenantRequest{Status: &suspended}))
	m.must(m.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "dedicated-empty", Kind: "dedicated"}))
	m.must(m.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "shared-empty", Kind: "shared"}))

	type refusal struct {
		name string
		call func() error
		code string
		msg  string
	}
	move := func(tenant, pool string) func() error {
		return func() error {
			_, err := m.op.AdminMoveTenant(ctx, tenant, api.MoveTenantRequest{Pool: pool})
			return err
		}
	}
	snapshot := func() string {
		var moves int
		if err := m.db.QueryRow(ctx, `SELECT count(*) FROM tenant_moves`).Scan(&moves); err != nil {
			t.Fatal(err)
		}
		var cas, homes string
		if err := m.db.QueryRow(ctx, `SELECT string_agg(id || '=' || md5(peer_ca) || '@' || state_version, ',' ORDER BY id) FROM cells`).Scan(&cas); err != nil {
			t.Fatal(err)
		}
		if err := m.db.QueryRow(ctx, `SELECT string_agg(id || '@' || home_cell_id || '/' || pool_id, ',' ORDER BY id) FROM tenants`).Scan(&homes); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d moves; cells %s; tenants %s", moves, cas, homes)
	}
	check := func(cases []refusal) {
		t.Helper()
		before := snapshot()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				if !client.IsCode(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
				}
			})
		}
		if after := snapshot(); after != before {
			t.Fatalf("refusals changed something:\n before %s\n after  %s", before, after)
		}
	}
	report := func(cell, broker string, moves bool) func() error {
		return func() error {
			return m.cells[cell].CellReport(ctx, cell, wire.Report{Version: wire.Version, BrokerID: broker, Moves: moves,
				HTTPScheme: "https", Partitions: []wire.PartitionStatus{}})
		}
	}
	register := func(cell, broker string, node int, ca string) func() error {
		return func() error { return m.registerErr(cell, broker, wire.Registration{NodeID: node, PeerCA: ca}) }
	}
	check([]refusal{
		{"no pool", move(tid, ""), "invalid_request", "pool is required"},
		{"unknown tenant", move("tn_nobody", "dedicated-1"), "not_found", `no such tenant "tn_nobody"`},
		{"unknown pool", move(tid, "nowhere"), "not_found", `no such pool "nowhere"`},
		{"own pool", move(tid, "shared-1"), "invalid_request", "is already on pool shared-1"},
		{"suspended tenant", move(sleeper.Tenant.ID, "dedicated-1"), "tenant_suspended", "resume it before moving it"},
		{"dedicated pool without a free cell", move(tid, "dedicated-empty"), "no_capacity", "dedicated pool dedicated-empty has no free cell"},
		{"shared pool without a cell", move(tid, "shared-empty"), "no_capacity", "no cell of shared pool shared-empty"},
		{"cancel unknown", func() error { _, err := m.op.AdminCancelTenantMove(ctx, 99); return err }, "not_found", "no such tenant move"},
		{"show unknown", func() error { _, err := m.op.AdminTenantMove(ctx, 99); return err }, "not_found", "no such tenant move"},
		{"list a bad state", func() error { _, err := m.op.AdminTenantMoves(ctx, "finished", ""); return err }, "invalid_request", `state "finished"`},
		{"peer CA not PEM", register("cell-1", "cell-1-b1", 1, "not a certificate"), "invalid_request", "peer_ca: mirror grant: peer CA is not a PEM CA certificate"},
		{"a second peer CA", register("cell-1", "cell-1-b2", 2, testkit.PeerCAPEM(t, "cell-1")), "already_exists", "cell cell-1 already has another peer CA"},
	})

	// A destination broker that does not report moves; too few live
	// brokers; a source without a peer CA.
	if err := report("cell-2", "cell-2-b3", false)(); err != nil {
		t.Fatal(err)
	}
	check([]refusal{{"broker without moves", move(tid, "dedicated-1"), "unavailable", "broker cell-2-b3 of cell cell-2 does not report tenant moves"}})
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b3"})
	off, active := "offline", "active"
	m.must(m.op.AdminUpdateBroker(ctx, "cell-2-b3", api.UpdateBrokerRequest{Status: &off}))
	check([]refusal{{"too few live brokers", move(tid, "dedicated-1"), "not_enough_replicas", "cell cell-2 has 2 live brokers"}})
	m.must(m.op.AdminUpdateBroker(ctx, "cell-2-b3", api.UpdateBrokerRequest{Status: &active}))
	m.must(m.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b9", CellID: "cell-1", NodeID: 9}))
	check([]refusal{{"broker without a Raft address", move(tid, "dedicated-1"), "unavailable", "broker cell-1-b9 of cell cell-1 has no Raft address"}})
	m.must(nil, m.op.AdminDeleteBroker(ctx, "cell-1-b9"))
	if _, err := m.db.Exec(ctx, `UPDATE cells SET peer_ca = '' WHERE id = 'cell-1'`); err != nil {
		t.Fatal(err)
	}
	check([]refusal{{"source without a peer CA", move(tid, "dedicated-1"), "unavailable", "cell cell-1 has no peer CA"}})
	if _, err := m.db.Exec(ctx, `UPDATE cells SET peer_ca = $1 WHERE id = 'cell-1'`, strings.TrimSpace(m.cas["cell-1"])); err != nil {
		t.Fatal(err)
	}

	// An unfinished replica move of one of the tenant's partitions.
	orig := (&moveCell{env: m.env}).replicas(m.topic, 0)
	reordered := []int{orig[1], orig[0], orig[2]}
	rm, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 0, Replicas: reordered})
	if err != nil {
		t.Fatal(err)
	}
	check([]refusal{{"a replica move unfinished", move(tid, "dedicated-1"), "unavailable", fmt.Sprintf("has replica move %d unfinished", rm.ID)}})
	m.reportAs("cell-1", wire.Report{BrokerID: fmt.Sprintf("cell-1-b%d", orig[0]), Partitions: []wire.PartitionStatus{
		{TopicID: m.topic, Partition: 0, LeaderNode: orig[0], LeaderEpoch: 2, Voters: reordered}}})
	if got, err := m.op.AdminMove(ctx, rm.ID); err != nil || got.State != "completed" {
		t.Fatalf("replica move %+v, %v", got, err)
	}

	// During a move: another move of the tenant, a move to the cell it
	// is going to, a topic change, a replica move... all refused.
	mv, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1"})
	if err != nil {
		t.Fatal(err)
	}
	other := m.signup("other")
	for _, b := range moveBrokers["cell-1"] {
		m.reportAs("cell-1", wire.Report{BrokerID: b})
	}
	check([]refusal{
		{"already moving", move(tid, "dedicated-1"), "already_exists", fmt.Sprintf("already has move %d (mirroring)", mv.ID)},
		{"destination taken", move(other.Tenant.ID, "dedicated-1"), "no_capacity", "has no free cell"},
		{"topic created while moving", func() error {
			_, err := m.tn.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "new", Partitions: 1})
			return err
		}, "unavailable", fmt.Sprintf("moving to another cell (move %d, mirroring)", mv.ID)},
		{"replica move while moving", func() error {
			_, err := m.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topic, Partition: 1, Replicas: []int{3, 2, 1}})
			return err
		}, "unavailable", fmt.Sprintf("moving to another cell (tenant move %d)", mv.ID)},
		{"partitions added while moving", func() error {
			n := 4
			_, err := m.tn.key.UpdateTopic(ctx, "orders", api.UpdateTopicRequest{Partitions: &n})
			return err
		}, "unavailable", "topic and partition changes wait"},
	})
	// The internal report route refuses another cell's key for a move
	// cell as for any (the cell key names its cell).
	if err := m.cells["cell-2"].Do(ctx, http.MethodPost, "/internal/v1/cells/cell-1/report", wire.Report{Version: wire.Version, BrokerID: "cell-1-b1"}, nil); !client.IsCode(err, "permission_denied") {
		t.Fatalf("cell-2's key reporting for cell-1: %v", err)
	}
}
