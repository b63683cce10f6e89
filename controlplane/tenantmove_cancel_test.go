package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestTenantMoveCancelBeforePromote: a move cancelled while fencing
// unfences the source, drops its grant and the destination's copy of the
// tenant, keeps the tenant home and its quotas whole; the tenant may move
// again at once.
func TestTenantMoveCancelBeforePromote(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	tid := m.tn.Tenant.ID
	fullQuotas := findTenant(m.state("cell-1"), tid).Quotas
	mv, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1"})
	if err != nil {
		t.Fatal(err)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(0))}))
	m.wantState(mv.ID, "fencing")
	v1, v2 := m.state("cell-1").StateVersion, m.state("cell-2").StateVersion
	got, err := m.op.AdminCancelTenantMove(ctx, mv.ID)
	if err != nil || got.State != "cancelled" || got.FinishedAt == nil || len(got.Partitions) != 0 {
		t.Fatalf("cancel while fencing: %+v, %v", got, err)
	}
	src, dst := m.state("cell-1"), m.state("cell-2")
	if src.StateVersion <= v1 || dst.StateVersion <= v2 {
		t.Fatal("a cancel did not bump both cells")
	}
	st := findTenant(src, tid)
	if st == nil || st.Move != nil || st.Quotas != fullQuotas || len(src.MirrorGrants) != 0 {
		t.Fatalf("source after the cancel: tenant %+v, grants %+v", st, src.MirrorGrants)
	}
	for _, x := range tenantTopics(src, tid) {
		if x.Fenced {
			t.Fatalf("topic %s still fenced after the cancel", x.ID)
		}
	}
	if k, _ := countKeys(dst, tid); findTenant(dst, tid) != nil || k != 0 || len(tenantTopics(dst, tid)) != 0 {
		t.Fatalf("destination still lists the tenant after the cancel: %+v", dst)
	}
	if cell, _ := m.home(); cell != "cell-1" {
		t.Fatalf("tenant home %s after the cancel", cell)
	}
	// Reports after the cancel change nothing; a second cancel is refused.
	m.reportAs("cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true}))
	if got := m.tenantMove(mv.ID); got.State != "cancelled" {
		t.Fatalf("a report moved a cancelled move to %s", got.State)
	}
	if _, err := m.op.AdminCancelTenantMove(ctx, mv.ID); !client.IsCode(err, "invalid_request") || !strings.Contains(err.Error(), "is cancelled") {
		t.Fatalf("cancel a cancelled move: %v", err)
	}
	if _, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1"}); err != nil {
		t.Fatalf("move again after the cancel: %v", err)
	}
}

// TestTenantMoveCancelRefusedAfterPromote: from promoting on the
// destination may hold writes, so a cancel is refused and changes nothing.
func TestTenantMoveCancelRefusedAfterPromote(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	mv := m.toPromoting()
	for _, step := range []string{"promoting", "switching"} {
		v1, v2 := m.state("cell-1").StateVersion, m.state("cell-2").StateVersion
		_, err := m.op.AdminCancelTenantMove(ctx, mv.ID)
		if !client.IsCode(err, "invalid_request") || !strings.Contains(err.Error(), "a move back is a new move") {
			t.Fatalf("cancel while %s: %v", step, err)
		}
		m.wantState(mv.ID, step)
		if m.state("cell-1").StateVersion != v1 || m.state("cell-2").StateVersion != v2 {
			t.Fatalf("a refused cancel while %s bumped a cell", step)
		}
		m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Promoted: true}))
	}
}

// TestTenantMoveResumesAfterRestart: the move lives in Postgres, so
// another control plane on the same database (a restarted one) publishes
// the same states and advances the move from the reports it gets.
func TestTenantMoveResumesAfterRestart(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	mv, err := m.op.AdminMoveTenant(ctx, m.tn.Tenant.ID, api.MoveTenantRequest{Pool: "dedicated-1"})
	if err != nil {
		t.Fatal(err)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(0))}))
	m.wantState(mv.ID, "fencing")
	other := m.secondServer()
	for _, cell := range []string{"cell-1", "cell-2"} {
		a := m.state(cell)
		b, _, err := other[cell].CellState(ctx, cell, -1, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.GeneratedAt, b.GeneratedAt = a.GeneratedAt.UTC(), a.GeneratedAt.UTC()
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Fatalf("cell %s state differs between the control planes:\n%s\n%s", cell, ja, jb)
		}
	}
	if err := m.reportVia(other["cell-1"], "cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true})); err != nil {
		t.Fatal(err)
	}
	m.wantState(mv.ID, "promoting")
	if err := m.reportVia(other["cell-2"], "cell-2", m.leads("cell-2", wire.MirrorStatus{Promoted: true})); err != nil {
		t.Fatal(err)
	}
	m.wantState(mv.ID, "switching")
}

// TestTenantMoveTwoControlPlanes: two control planes get, at once,
// reports that each complete the same step (two destination brokers that
// both believe they lead, and a source report beside them); the switch
// happens exactly once and no report fails.
func TestTenantMoveTwoControlPlanes(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	mv := m.toPromoting()
	other := m.secondServer()
	promoted := func(broker string, node int) wire.Report {
		ms := wire.MirrorStatus{Promoted: true}
		return wire.Report{BrokerID: broker, Partitions: []wire.PartitionStatus{mirrorStatus(m.topic, 0, node, ms), mirrorStatus(m.topic, 1, node, ms)}}
	}
	reports := []struct {
		c      *client.Client
		cell   string
		report wire.Report
	}{
		{m.cells["cell-2"], "cell-2", promoted("cell-2-b1", 1)},
		{other["cell-2"], "cell-2", promoted("cell-2-b2", 2)},
		{other["cell-1"], "cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true})},
		{m.cells["cell-1"], "cell-1", wire.Report{BrokerID: "cell-1-b2"}},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(reports))
	for _, r := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.reportVia(r.c, r.cell, r.report)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent report: %v", err)
		}
	}
	got := m.wantState(mv.ID, "switching")
	var switches int
	if err := m.db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'tenant.move.switching'`).Scan(&switches); err != nil || switches != 1 {
		t.Fatalf("%d switches audited (%v), want 1", switches, err)
	}
	if src := m.state("cell-1"); src.StateVersion != *got.SwitchVersion || findTenant(src, m.tn.Tenant.ID) != nil {
		t.Fatalf("source state %d (switch %d) after the concurrent reports", src.StateVersion, *got.SwitchVersion)
	}
}

// TestTenantMovesRaceForOneDedicatedCell: two tenants moved at once, each
// through its own control plane, to a dedicated pool with one free cell:
// one move gets the cell, the other is refused no_capacity.
func TestTenantMovesRaceForOneDedicatedCell(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	other := m.signup("rival")
	second := m.secondOperator()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, c := range []struct {
		op     *client.Client
		tenant string
	}{{m.op, m.tn.Tenant.ID}, {second, other.Tenant.ID}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.op.AdminMoveTenant(ctx, c.tenant, api.MoveTenantRequest{Pool: "dedicated-1"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var ok, refused int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case client.IsCode(err, "no_capacity"):
			refused++
		default:
			t.Fatalf("concurrent move: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d moves started and %d refused, want one of each", ok, refused)
	}
}

// TestTenantMoveToSharedPool: a shared pool takes several moving tenants,
// each on its least loaded cell, as signup places them, counting the
// tenants moving in.
func TestTenantMoveToSharedPool(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	resident, second := m.signup("resident"), m.signup("second") // on cell-1, the only shared cell yet
	m.must(m.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "shared-2", Kind: "shared"}))
	for _, cell := range []string{"cell-3", "cell-4"} {
		m.must(m.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: cell, PoolID: "shared-2"}))
		m.cells[cell] = m.cellKeyClient(m.url, cell)
		ca := testkit.PeerCAPEM(t, cell)
		for i := range 3 {
			b := fmt.Sprintf("%s-b%d", cell, i+1)
			m.register(cell, b, wire.Registration{NodeID: i + 1, RaftAddr: b + ":7000", PeerCA: ca})
			m.reportAs(cell, wire.Report{BrokerID: b})
		}
	}
	// cell-3 gets a tenant of its own first, so the move picks cell-4.
	if _, err := m.db.Exec(ctx, `UPDATE tenants SET home_cell_id = 'cell-3', pool_id = 'shared-2' WHERE id = $1`, resident.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	mv, err := m.op.AdminMoveTenant(ctx, m.tn.Tenant.ID, api.MoveTenantRequest{Pool: "shared-2"})
	if err != nil || mv.DestCellID != "cell-4" {
		t.Fatalf("move to shared-2: %+v, %v", mv, err)
	}
	if g := m.state("cell-1").MirrorGrants; len(g) != 1 || g[0].Cell != "cell-4" {
		t.Fatalf("grants %+v", g)
	}
	// cell-3 and cell-4 now have one tenant each (one homed, one coming).
	if mv, err := m.op.AdminMoveTenant(ctx, second.Tenant.ID, api.MoveTenantRequest{Pool: "shared-2"}); err != nil || mv.State != "mirroring" || mv.DestCellID != "cell-3" {
		t.Fatalf("a second tenant's move to the shared pool: %+v, %v", mv, err)
	}
}

// TestTenantMoveKeyChangesReachBothCells: while a tenant moves, both
// cells serve its keys, so a key created or revoked meanwhile reaches the
// destination's state as well as the source's at once.
func TestTenantMoveKeyChangesReachBothCells(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	if _, err := m.op.AdminMoveTenant(ctx, m.tn.Tenant.ID, api.MoveTenantRequest{Pool: "dedicated-1"}); err != nil {
		t.Fatal(err)
	}
	has := func(cell, key string) bool {
		for _, k := range m.state(cell).Keys {
			if k.ID == key {
				return true
			}
		}
		return false
	}
	v := m.state("cell-2").StateVersion
	k := m.createKey(m.tn.key, api.CreateAPIKeyRequest{Description: "mid-move", Role: "client"})
	if m.state("cell-2").StateVersion <= v || !has("cell-2", k.ID) || !has("cell-1", k.ID) {
		t.Fatalf("a key created mid-move: destination version %d (was %d), on the destination %v, on the source %v",
			m.state("cell-2").StateVersion, v, has("cell-2", k.ID), has("cell-1", k.ID))
	}
	v = m.state("cell-2").StateVersion
	if _, err := m.tn.key.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if m.state("cell-2").StateVersion <= v || has("cell-2", k.ID) || has("cell-1", k.ID) {
		t.Fatal("a key revoked mid-move is still served")
	}
}
