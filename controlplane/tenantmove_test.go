package controlplane_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
)

func findTenant(st wire.CellState, id string) *wire.Tenant {
	for i := range st.Tenants {
		if st.Tenants[i].ID == id {
			return &st.Tenants[i]
		}
	}
	return nil
}

func tenantTopics(st wire.CellState, tenant string) []wire.Topic {
	var out []wire.Topic
	for _, x := range st.Topics {
		if x.TenantID == tenant {
			out = append(out, x)
		}
	}
	return out
}

func countKeys(st wire.CellState, tenant string) (keys, acls int) {
	for _, k := range st.Keys {
		if k.TenantID == tenant {
			keys++
		}
	}
	for _, a := range st.ACLs {
		if a.TenantID == tenant {
			acls++
		}
	}
	return keys, acls
}

// TestTenantMoveHappyPath drives a tenant's move to a dedicated pool
// through every state with reports as the two cells' brokers send them,
// and checks what each published state says at each step: the grant,
// mirrors and halved quotas while mirroring; the fence; the promotion;
// the switch (the tenant's home, partitions and key home answer the
// destination, the source drops it all); the final offsets handed over;
// and, once every offsets partition acknowledged them, done with the
// destination's groups released and the quotas whole.
func TestTenantMoveHappyPath(t *testing.T) {
	m := newTenantMoveEnv(t)
	ctx := context.Background()
	tid := m.tn.Tenant.ID
	full := m.state("cell-1")
	fullQuotas := findTenant(full, tid).Quotas
	v1, v2 := full.StateVersion, m.state("cell-2").StateVersion

	mv, err := m.op.AdminMoveTenant(ctx, tid, api.MoveTenantRequest{Pool: "dedicated-1"})
	if err != nil {
		t.Fatal(err)
	}
	if mv.State != "mirroring" || mv.SourceCellID != "cell-1" || mv.DestCellID != "cell-2" || mv.PoolID != "dedicated-1" ||
		len(mv.Partitions) != 2 || !strings.HasPrefix(mv.CreatedBy, "key:") || mv.FinishedAt != nil {
		t.Fatalf("new tenant move %+v", mv)
	}
	for i, p := range mv.Partitions {
		if p.Topic != "orders" || p.Partition != i || len(p.Replicas) != 3 || p.Lag != nil {
			t.Fatalf("partition %d of the move: %+v", i, p)
		}
	}

	// Mirroring: the source grants, the destination mirrors.
	src, dst := m.state("cell-1"), m.state("cell-2")
	if src.StateVersion <= v1 || dst.StateVersion <= v2 {
		t.Fatalf("state versions %d, %d after the move started, were %d, %d", src.StateVersion, dst.StateVersion, v1, v2)
	}
	st := findTenant(src, tid)
	if st == nil || st.Move == nil || st.Move.Role != wire.MoveSource || st.Move.Peer != "cell-2" || st.Move.HoldGroups ||
		st.Quotas.ProduceBytesPerSec != (fullQuotas.ProduceBytesPerSec+1)/2 || st.Quotas.FetchBytesPerSec != (fullQuotas.FetchBytesPerSec+1)/2 ||
		st.Quotas.MaxPartitions != fullQuotas.MaxPartitions {
		t.Fatalf("source tenant while mirroring: %+v (full quotas %+v)", st, fullQuotas)
	}
	if len(src.MirrorGrants) != 1 || src.MirrorGrants[0].Cell != "cell-2" || src.MirrorGrants[0].TenantID != tid ||
		!slices.Equal(src.MirrorGrants[0].Topics, []string{m.topic}) || src.MirrorGrants[0].PeerCA != strings.TrimSpace(m.cas["cell-2"]) {
		t.Fatalf("source grants %+v", src.MirrorGrants)
	}
	if err := src.MirrorGrants.Validate(); err != nil {
		t.Fatalf("source grants do not validate: %v", err)
	}
	if x := tenantTopics(src, tid); len(x) != 1 || x[0].Fenced || x[0].Mirror != nil {
		t.Fatalf("source topics while mirroring: %+v", x)
	}
	dt := findTenant(dst, tid)
	if dt == nil || dt.Move == nil || dt.Move.Role != wire.MoveDestination || dt.Move.Peer != "cell-1" || !dt.Move.HoldGroups ||
		dt.Move.GroupOffsets != nil || dt.Quotas != st.Quotas {
		t.Fatalf("destination tenant while mirroring: %+v", dt)
	}
	if err := dt.Move.Validate(); err != nil {
		t.Fatal(err)
	}
	if k, a := countKeys(dst, tid); k != 1 || a != 1 {
		t.Fatalf("destination has %d keys and %d ACLs of the tenant, want 1 and 1", k, a)
	}
	dx := tenantTopics(dst, tid)
	if len(dx) != 1 || dx[0].ID != m.topic || dx[0].Mirror == nil || dx[0].Mirror.SourceCell != "cell-1" || dx[0].Mirror.Promote ||
		len(dx[0].Mirror.SourceBrokers) != 3 || dx[0].Mirror.SourceBrokers[0] != (wire.MirrorBroker{NodeID: 1, RaftAddr: "cell-1-b1.raft:7000"}) ||
		dx[0].Mirror.SourcePeerCA != strings.TrimSpace(m.cas["cell-1"]) || len(dx[0].Partitions) != 2 {
		t.Fatalf("destination topics while mirroring: %+v", dx)
	}
	if err := dx[0].Mirror.Validate(); err != nil {
		t.Fatalf("destination mirror does not validate: %v", err)
	}
	for i, p := range dx[0].Partitions {
		if !slices.Equal(p.Replicas, mv.Partitions[i].Replicas) || p.Adding != nil {
			t.Fatalf("destination partition %d published %+v, move placed it on %v", i, p, mv.Partitions[i].Replicas)
		}
	}
	if len(dst.MirrorGrants) != 0 {
		t.Fatalf("destination grants %+v", dst.MirrorGrants)
	}

	// A lagging mirror, a mirror that has not read its source yet (no
	// lag), or a follower's report, does not fence.
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true}))
	if got := m.wantState(mv.ID, "mirroring"); got.Partitions[0].Lag != nil {
		t.Fatalf("after a mirror that has not looked: %+v", got)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(50_000))}))
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b2", Partitions: []wire.PartitionStatus{
		mirrorStatus(m.topic, 0, 1, wire.MirrorStatus{Mirroring: true}), mirrorStatus(m.topic, 1, 1, wire.MirrorStatus{Mirroring: true})}})
	got := m.wantState(mv.ID, "mirroring")
	if got.Partitions[0].Lag == nil || *got.Partitions[0].Lag != 50_000 || !got.Partitions[0].Mirroring || !strings.Contains(got.Error, "2 of 2") {
		t.Fatalf("after a lagging mirror: %+v", got)
	}
	m.reportAs("cell-2", m.leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(12))}))
	m.wantState(mv.ID, "fencing")
	for _, x := range tenantTopics(m.state("cell-1"), tid) {
		if !x.Fenced {
			t.Fatalf("source topic %s not fenced in step fencing", x.ID)
		}
	}
	if x := tenantTopics(m.state("cell-2"), tid); x[0].Mirror.Promote {
		t.Fatal("destination promotes before the source is fenced")
	}

	// One partition fenced is not enough; both are.
	m.reportAs("cell-1", wire.Report{BrokerID: "cell-1-b1", Partitions: []wire.PartitionStatus{
		mirrorStatus(m.topic, 0, 1, wire.MirrorStatus{Fenced: true, FencedEnd: 70})}})
	m.wantState(mv.ID, "fencing")
	m.reportAs("cell-1", m.leads("cell-1", wire.MirrorStatus{Fenced: true, FencedEnd: 70}))
	got = m.wantState(mv.ID, "promoting")
	if !got.Partitions[1].Fenced || got.Partitions[1].FencedEnd == nil || *got.Partitions[1].FencedEnd != 70 {
		t.Fatalf("fenced partition %+v", got.Partitions[1])
	}
	if x := tenantTopics(m.state("cell-2"), tid); !x[0].Mirror.Promote {
		t.Fatal("destination state does not promote in step promoting")
	}
	if x := tenantTopics(m.state("cell-1"), tid); !x[0].Fenced {
		t.Fatal("source unfenced in step promoting")
	}

	// Promoted everywhere: the switch. The promoted leaders' epoch is
	// above the source's.
	promoted := m.leads("cell-2", wire.MirrorStatus{Promoted: true})
	for i := range promoted.Partitions {
		promoted.Partitions[i].LeaderEpoch = 9
	}
	m.reportAs("cell-2", promoted)
	got = m.wantState(mv.ID, "switching")
	if got.SwitchVersion == nil {
		t.Fatal("no switch version")
	}
	if cell, pool := m.home(); cell != "cell-2" || pool != "dedicated-1" {
		t.Fatalf("tenant home %s on pool %s after the switch", cell, pool)
	}
	src, dst = m.state("cell-1"), m.state("cell-2")
	if src.StateVersion != *got.SwitchVersion {
		t.Fatalf("source state version %d, switch version %d", src.StateVersion, *got.SwitchVersion)
	}
	if k, a := countKeys(src, tid); findTenant(src, tid) != nil || k != 0 || a != 0 || len(tenantTopics(src, tid)) != 0 || len(src.MirrorGrants) != 0 {
		t.Fatalf("source still serves the tenant after the switch: %+v", src)
	}
	dt = findTenant(dst, tid)
	if dt == nil || dt.Move == nil || !dt.Move.HoldGroups || dt.Move.GroupOffsets != nil || dt.Quotas.ProduceBytesPerSec != st.Quotas.ProduceBytesPerSec {
		t.Fatalf("destination tenant after the switch: %+v", dt)
	}
	dx = tenantTopics(dst, tid)
	if len(dx) != 1 || dx[0].Mirror != nil || !slices.Equal(dx[0].Partitions[1].Replicas, mv.Partitions[1].Replicas) {
		t.Fatalf("destination topics after the switch: %+v", dx)
	}
	var cells []string
	rows, _ := m.db.Query(ctx, `SELECT DISTINCT cell_id FROM partitions WHERE topic_id = $1`, m.topic)
	for rows.Next() {
		var c string
		_ = rows.Scan(&c)
		cells = append(cells, c)
	}
	if rows.Err() != nil || !slices.Equal(cells, []string{"cell-2"}) {
		t.Fatalf("partitions rows on %v after the switch (%v)", cells, rows.Err())
	}
	home, err := m.cells["cell-1"].KeyHome(ctx, "cell-1", m.tn.keyID, m.tn.secret)
	if err != nil || home.Status != wire.KeyValid || home.Cell != "cell-2" || len(home.Brokers) != 3 ||
		home.Brokers[0] != (wire.HomeNode{NodeID: 1, KafkaAddr: "10.0.2.1:9092", HTTPAddr: "10.0.2.1:8090", HTTPScheme: "https"}) {
		t.Fatalf("key home after the switch: %+v, %v", home, err)
	}
	// The destination leaders' last reports are the partitions' status
	// from the switch on: a redirected client learns each leader and its
	// epoch without waiting for the destination's next reports.
	if len(home.Topics) != 1 || len(home.Topics[0].Partitions) != 2 {
		t.Fatalf("key home topics after the switch: %+v", home.Topics)
	}
	for _, hp := range home.Topics[0].Partitions {
		if hp.Leader != 1 || hp.LeaderEpoch != 9 {
			t.Fatalf("key home partition %d after the switch: leader %d epoch %d, want the promoted leader 1 at epoch 9", hp.Partition, hp.Leader, hp.LeaderEpoch)
		}
	}

	// The source's coordinators report the final offsets once they run
	// the switch's state; a report of an older state does not count.
	groups := []wire.GroupLag{{TenantID: tid, Group: "billing", TopicID: m.topic, Partition: 1, CommittedOffset: 42, Measured: true}}
	m.reportAs("cell-1", wire.Report{BrokerID: "cell-1-b1", StateVersion: *got.SwitchVersion - 1, Groups: groups})
	m.reportAs("cell-1", wire.Report{BrokerID: "cell-1-b2", StateVersion: *got.SwitchVersion})
	got = m.wantState(mv.ID, "switching")
	if !strings.Contains(got.Error, "cell-1-b1, cell-1-b3") {
		t.Fatalf("switching error %q, want it to name the brokers not past the switch", got.Error)
	}
	m.reportAs("cell-1", wire.Report{BrokerID: "cell-1-b1", StateVersion: *got.SwitchVersion, Groups: groups})
	m.reportAs("cell-1", wire.Report{BrokerID: "cell-1-b3", StateVersion: *got.SwitchVersion + 1})
	got = m.wantState(mv.ID, "offsets")
	if got.GroupOffsets != 1 {
		t.Fatalf("%d group offsets taken, want 1", got.GroupOffsets)
	}
	dt = findTenant(m.state("cell-2"), tid)
	want := []wire.CommittedOffset{{Group: "billing", TopicID: m.topic, Partition: 1, Offset: 42}}
	if dt.Move == nil || !dt.Move.HoldGroups || !slices.Equal(dt.Move.GroupOffsets, want) {
		t.Fatalf("destination tenant in step offsets: %+v", dt.Move)
	}

	// The destination's coordinators acknowledge; all 8 offsets
	// partitions must.
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b1", OffsetsImported: []wire.OffsetsImport{{TenantID: tid, Partitions: []int{0, 3, 6}}}})
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b2", OffsetsImported: []wire.OffsetsImport{{TenantID: "tn_other", Partitions: []int{1, 4, 7}}}})
	got = m.wantState(mv.ID, "offsets")
	if !slices.Equal(got.OffsetsImported, []int{0, 3, 6}) {
		t.Fatalf("offsets imported %v", got.OffsetsImported)
	}
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b2", OffsetsImported: []wire.OffsetsImport{{TenantID: tid, Partitions: []int{1, 4, 7}}}})
	m.reportAs("cell-2", wire.Report{BrokerID: "cell-2-b3", OffsetsImported: []wire.OffsetsImport{{TenantID: tid, Partitions: []int{2, 5}}}})
	got = m.wantState(mv.ID, "done")
	if got.FinishedAt == nil || got.Error != "" {
		t.Fatalf("done move %+v", got)
	}
	dt = findTenant(m.state("cell-2"), tid)
	if dt.Move != nil || dt.Quotas != fullQuotas {
		t.Fatalf("destination tenant after done: %+v, want no move and quotas %+v", dt, fullQuotas)
	}
	var audits int
	if err := m.db.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action LIKE 'tenant.move%'`, tid).Scan(&audits); err != nil || audits != 6 {
		t.Fatalf("%d tenant move audit rows (%v), want 6: the start and five steps", audits, err)
	}
	// The tenant may move again, and its topics change again.
	if _, err := m.tn.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "later", Partitions: 1}); err != nil {
		t.Fatalf("create a topic after the move: %v", err)
	}
}
