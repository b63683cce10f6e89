package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane"
)

// tenantMoveEnv is a control plane with a tenant "mover" (topic "orders"
// of two partitions, an ACL) on cell-1 of the shared pool, and a
// dedicated pool "dedicated-1" with one empty cell, cell-2. Every broker
// of both cells registered with its cell's peer CA and reported that it
// takes part in tenant moves, through cells, the clients carrying each
// cell's key.
type tenantMoveEnv struct {
	*env
	tn    *tenant
	topic string
	cells map[string]*client.Client
	cas   map[string]string
}

// moveBrokers are the brokers of each cell: cell-X-bN has node id N.
var moveBrokers = map[string][]string{
	"cell-1": {"cell-1-b1", "cell-1-b2", "cell-1-b3"},
	"cell-2": {"cell-2-b1", "cell-2-b2", "cell-2-b3"},
}

func newTenantMoveEnv(t *testing.T) *tenantMoveEnv {
	e := newEnv(t)
	ctx := context.Background()
	m := &tenantMoveEnv{env: e, tn: e.signup("mover"), cells: map[string]*client.Client{}, cas: map[string]string{}}
	m.topic = e.createTopic(m.tn, "orders", 2)
	if _, err := m.tn.key.CreateACL(ctx, api.CreateACLRequest{Principal: "*", ResourceType: "topic", ResourceName: "orders",
		PatternType: "literal", Operation: "read", Permission: "allow"}); err != nil {
		t.Fatal(err)
	}
	e.must(e.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "dedicated-1", Kind: "dedicated"}))
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "dedicated-1"}))
	for i := range 3 {
		e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: fmt.Sprintf("cell-2-b%d", i+1), CellID: "cell-2", NodeID: i + 1,
			KafkaAddr: fmt.Sprintf("10.0.2.%d:9092", i+1), HTTPAddr: fmt.Sprintf("10.0.2.%d:8090", i+1)}))
	}
	for _, cell := range []string{"cell-1", "cell-2"} {
		m.cells[cell] = m.cellKeyClient(m.url, cell)
		m.cas[cell] = testkit.PeerCAPEM(t, cell)
		for i, b := range moveBrokers[cell] {
			m.register(cell, b, wire.Registration{NodeID: i + 1, RaftAddr: fmt.Sprintf("%s.raft:%d", b, 7000+i), PeerCA: m.cas[cell]})
			m.reportAs(cell, wire.Report{BrokerID: b})
		}
	}
	return m
}

func (m *tenantMoveEnv) registerErr(cell, broker string, r wire.Registration) error {
	return m.cells[cell].Do(context.Background(), http.MethodPut, "/internal/v1/cells/"+cell+"/brokers/"+broker, r, nil)
}

func (m *tenantMoveEnv) register(cell, broker string, r wire.Registration) {
	m.t.Helper()
	if err := m.registerErr(cell, broker, r); err != nil {
		m.t.Fatalf("register %s: %v", broker, err)
	}
}

// reportAs sends r to cell through the test's own control plane, with
// its version, Moves and an https data API filled in.
func (m *tenantMoveEnv) reportAs(cell string, r wire.Report) {
	m.t.Helper()
	if err := m.reportVia(m.cells[cell], cell, r); err != nil {
		m.t.Fatalf("report of %s: %v", r.BrokerID, err)
	}
}

func (m *tenantMoveEnv) reportVia(c *client.Client, cell string, r wire.Report) error {
	r.Version, r.Moves, r.HTTPScheme = wire.Version, true, "https"
	if r.Partitions == nil {
		r.Partitions = []wire.PartitionStatus{}
	}
	return c.CellReport(context.Background(), cell, r)
}

// mirrorStatus is a leader's report of partition part of the topic with
// its part in the move.
func mirrorStatus(topic string, part, leader int, ms wire.MirrorStatus) wire.PartitionStatus {
	return wire.PartitionStatus{TopicID: topic, Partition: part, LeaderNode: leader, LeaderEpoch: 3, Voters: []int{1, 2, 3}, Mirror: &ms}
}

// leads is broker node 1's report leading both partitions of the topic.
func (m *tenantMoveEnv) leads(cell string, ms wire.MirrorStatus) wire.Report {
	return wire.Report{BrokerID: cell + "-b1", Partitions: []wire.PartitionStatus{
		mirrorStatus(m.topic, 0, 1, ms), mirrorStatus(m.topic, 1, 1, ms)}}
}

// state is cell's published state.
func (m *tenantMoveEnv) state(cell string) wire.CellState {
	m.t.Helper()
	st, _, err := m.cells[cell].CellState(context.Background(), cell, -1, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	return st
}

func (m *tenantMoveEnv) tenantMove(id int64) api.TenantMove {
	m.t.Helper()
	mv, err := m.op.AdminTenantMove(context.Background(), id)
	if err != nil {
		m.t.Fatal(err)
	}
	return mv
}

func (m *tenantMoveEnv) wantState(id int64, want string) api.TenantMove {
	m.t.Helper()
	mv := m.tenantMove(id)
	if mv.State != want {
		m.t.Fatalf("tenant move %d is %s (error %q), want %s", id, mv.State, mv.Error, want)
	}
	return mv
}

// home is the tenant's home cell and pool.
func (m *tenantMoveEnv) home() (cell, pool string) {
	m.t.Helper()
	if err := m.db.QueryRow(context.Background(), `SELECT home_cell_id, pool_id FROM tenants WHERE id = $1`, m.tn.Tenant.ID).
		Scan(&cell, &pool); err != nil {
		m.t.Fatal(err)
	}
	return cell, pool
}

// toPromoting starts a move to dedicated-1 and drives it to promoting.
func (m *tenantMoveEnv) toPromoting() api.TenantMove {
	m.t.Helper()
	mv, err := m.op.AdminMoveTenant(context.Background(), m.tn.Tenant.ID, api.MoveTenantRequest{Pool: "dedicated-1"})
	if err != nil {
		m.t.Fatal(err)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(3))}))
	m.wantState(mv.ID, "fencing")
	m.reportAs("cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true, FencedEnd: 100}))
	return m.wantState(mv.ID, "promoting")
}

// secondServer is another control plane on the same database (a second
// instance, or this one restarted), with a client per cell.
func (m *tenantMoveEnv) secondServer() map[string]*client.Client {
	m.t.Helper()
	url := m.secondURL()
	out := map[string]*client.Client{}
	for _, cell := range []string{"cell-1", "cell-2"} {
		out[cell] = m.cellKeyClient(url, cell)
	}
	return out
}

// secondOperator is an operator client of another control plane on the
// same database.
func (m *tenantMoveEnv) secondOperator() *client.Client {
	m.t.Helper()
	url := m.secondURL()
	id, secret, err := controlplane.CreateOperatorKey(context.Background(), m.db, "second operator")
	if err != nil {
		m.t.Fatal(err)
	}
	return client.New(url, client.WithAPIKey(id, secret))
}
