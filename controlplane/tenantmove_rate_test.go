package controlplane_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// mirrorRates is each of the tenant's destination topics' per-partition
// copy rate in cell's published state; -1 for a topic without a mirror.
func (m *tenantMoveEnv) mirrorRates(cell string) []int64 {
	m.t.Helper()
	var out []int64
	for _, x := range tenantTopics(m.state(cell), m.tn.Tenant.ID) {
		if x.Mirror == nil {
			out = append(out, -1)
			continue
		}
		out = append(out, x.Mirror.BytesPerSec)
	}
	return out
}

// TestTenantMoveRate: a move's copy rate is split equally over its
// partitions (rounded up) in the destination's state, and a restarted
// control plane publishes the same; changing it while the destination
// copies republishes the destination's state alone, the same rate again
// publishes nothing, and once the move has switched a change is refused.
func TestTenantMoveRate(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	tid := m.tn.Tenant.ID
	v1 := m.state("cell-1").StateVersion

	mv, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1", BytesPerSec: 3_000_001})
	if err != nil {
		t.Fatal(err)
	}
	if mv.BytesPerSec != 3_000_001 || mv.PartitionBytesPerSec != 1_500_001 {
		t.Fatalf("new move's rates %d, %d; want 3000001 over all, 1500001 for each of 2 partitions", mv.BytesPerSec, mv.PartitionBytesPerSec)
	}
	if got := m.mirrorRates("cell-2"); len(got) != 1 || got[0] != 1_500_001 {
		t.Fatalf("destination mirrors' rates %v, want [1500001]", got)
	}
	second := m.secondServer()
	st, _, err := second["cell-2"].CellState(ctx, "cell-2", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if x := tenantTopics(st, tid); len(x) != 1 || x[0].Mirror == nil || x[0].Mirror.BytesPerSec != 1_500_001 {
		t.Fatalf("a second control plane publishes %+v", x)
	}
	if err := x0Mirror(st, tid).Validate(); err != nil {
		t.Fatalf("the destination's mirror does not validate: %v", err)
	}

	// The destination leader's report says which rate its pullers apply.
	if p := m.tenantMove(mv.ID).Partitions[0]; p.MirrorBytesPerSec != nil {
		t.Fatalf("before any report a partition's applied rate is %d, want none", *p.MirrorBytesPerSec)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(90_000)), BytesPerSec: 1_500_001}))
	for _, p := range m.tenantMove(mv.ID).Partitions {
		if p.MirrorBytesPerSec == nil || *p.MirrorBytesPerSec != 1_500_001 {
			t.Fatalf("after the destination's report, partition %d's applied rate is %v, want 1500001", p.Partition, p.MirrorBytesPerSec)
		}
	}

	// A change while mirroring reaches the destination alone.
	src, dst := m.state("cell-1").StateVersion, m.state("cell-2").StateVersion
	if src <= v1 {
		t.Fatalf("source state version %d after the move started, was %d", src, v1)
	}
	rate := int64(0)
	got, err := m.op.AdminUpdateTenantMove(ctx, mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &rate})
	if err != nil {
		t.Fatal(err)
	}
	if got.BytesPerSec != 0 || got.PartitionBytesPerSec != 0 || got.State != "mirroring" {
		t.Fatalf("after setting the brokers' default: %+v", got)
	}
	if r := m.mirrorRates("cell-2"); len(r) != 1 || r[0] != 0 {
		t.Fatalf("destination mirrors' rates %v after setting 0, want [0]", r)
	}
	if v := m.state("cell-1").StateVersion; v != src {
		t.Fatalf("a rate change republished the source: version %d, was %d", v, src)
	}
	dst2 := m.state("cell-2").StateVersion
	if dst2 <= dst {
		t.Fatalf("a rate change did not republish the destination: version %d, was %d", dst2, dst)
	}
	if _, err := m.op.AdminUpdateTenantMove(ctx, mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &rate}); err != nil {
		t.Fatal(err)
	}
	if v := m.state("cell-2").StateVersion; v != dst2 {
		t.Fatalf("the same rate again republished the destination: version %d, was %d", v, dst2)
	}
	var audits int
	if err := m.db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'tenant.move.update' AND target = $1`,
		fmt.Sprint(mv.ID)).Scan(&audits); err != nil {
		t.Fatal(err)
	}
	if audits != 1 {
		t.Fatalf("%d audit entries of tenant.move.update, want 1 (the same rate again changes nothing)", audits)
	}

	// Promoting still copies: the rate may change; after the switch it
	// may not.
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(3))}))
	m.wantState(mv.ID, "fencing")
	m.reportAs("cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true, FencedEnd: 100}))
	m.wantState(mv.ID, "promoting")
	rate = 1 << 20
	if got, err := m.op.AdminUpdateTenantMove(ctx, mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &rate}); err != nil || got.PartitionBytesPerSec != 1<<19 {
		t.Fatalf("a rate change while promoting: %+v, %v", got, err)
	}
	if r := m.mirrorRates("cell-2"); len(r) != 1 || r[0] != 1<<19 {
		t.Fatalf("destination mirrors' rates %v while promoting, want [%d]", r, 1<<19)
	}
	promoted := m.leads("cell-2", wire.MirrorStatus{Promoted: true})
	for i := range promoted.Partitions {
		promoted.Partitions[i].LeaderEpoch = 9
	}
	m.reportAs("cell-2", promoted)
	m.wantState(mv.ID, "switching")
	before := m.state("cell-2").StateVersion
	rate = 5 << 20
	if _, err := m.op.AdminUpdateTenantMove(ctx, mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &rate}); !client.IsCode(err, "invalid_request") ||
		!strings.Contains(err.Error(), "has stopped copying from the source") {
		t.Fatalf("a rate change after the switch: %v", err)
	}
	if got := m.tenantMove(mv.ID); got.BytesPerSec != 1<<20 {
		t.Fatalf("a refused change left the rate %d", got.BytesPerSec)
	}
	if v := m.state("cell-2").StateVersion; v != before {
		t.Fatalf("a refused change republished the destination: version %d, was %d", v, before)
	}
}

// x0Mirror is the tenant's first topic's mirror in st.
func x0Mirror(st wire.CellState, tenant string) *wire.TopicMirror {
	return tenantTopics(st, tenant)[0].Mirror
}

// TestTenantMoveRateBadInput: a negative rate, a missing one, an unknown
// move and a finished one are each refused with their own message, and
// nothing changes.
func TestTenantMoveRateBadInput(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	tid := m.tn.Tenant.ID
	if _, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1", BytesPerSec: -1}); !client.IsCode(err, "invalid_request") ||
		!strings.Contains(err.Error(), "bytes_per_sec -1 is negative") {
		t.Fatalf("a move at a negative rate: %v", err)
	}
	if ms, err := m.op.AdminTenantMoves(ctx, "", tid); err != nil || len(ms) != 0 {
		t.Fatalf("a refused move left %+v (%v)", ms, err)
	}
	mv, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1", BytesPerSec: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	neg := int64(-5)
	zero := int64(0)
	for _, tc := range []struct {
		name string
		id   int64
		req  api.UpdateTenantMoveRequest
		code string
		msg  string
	}{
		{"negative", mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &neg}, "invalid_request", "bytes_per_sec -5 is negative"},
		{"missing", mv.ID, api.UpdateTenantMoveRequest{}, "invalid_request", "bytes_per_sec is required"},
		{"unknown move", mv.ID + 100, api.UpdateTenantMoveRequest{BytesPerSec: &zero}, "not_found", "no such tenant move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.op.AdminUpdateTenantMove(ctx, tc.id, tc.req); !client.IsCode(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}
	if got := m.tenantMove(mv.ID); got.BytesPerSec != 4<<20 || got.PartitionBytesPerSec != 2<<20 {
		t.Fatalf("refusals changed the move's rate: %+v", got)
	}
	if _, err := m.op.AdminCancelTenantMove(ctx, mv.ID); err != nil {
		t.Fatal(err)
	}
	if got := m.tenantMove(mv.ID); got.BytesPerSec != 4<<20 || got.PartitionBytesPerSec != 0 || len(got.Partitions) != 0 {
		t.Fatalf("a cancelled move (its placement dropped) shows rates %d, %d over %d partitions; want 4 MiB/s shared by none",
			got.BytesPerSec, got.PartitionBytesPerSec, len(got.Partitions))
	}
	if _, err := m.op.AdminUpdateTenantMove(ctx, mv.ID, api.UpdateTenantMoveRequest{BytesPerSec: &zero}); !client.IsCode(err, "invalid_request") ||
		!strings.Contains(err.Error(), "is cancelled; its rate can no longer change") {
		t.Fatalf("a rate change of a cancelled move: %v", err)
	}
}
