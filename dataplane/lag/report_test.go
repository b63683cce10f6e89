package lag

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// A coordinator's lag goes from the tracker through the broker's report to
// the control plane, which serves it to the tenant (and no one else): every
// partition of the consumed topic, the one without a commit with no
// committed offset and lagging by its retained records.
func TestReportToControlPlane(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	ctx := context.Background()
	tn := cp.Signup("lagging", "")
	other := cp.Signup("other", "")
	if _, err := tn.Key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 3, Config: map[string]string{"retention.ms": "3600000"}}); err != nil {
		t.Fatal(err)
	}
	cell := cp.CellClient()
	st, _, err := cell.CellState(ctx, cptest.Cell, -1, 0)
	if err != nil || len(st.Topics) != 1 {
		t.Fatalf("cell state: %+v %v", st.Topics, err)
	}
	syncer, err := cellview.New(cellview.Config{Cell: cptest.Cell, API: cell, CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.Apply(st); err != nil {
		t.Fatal(err)
	}
	topic := st.Topics[0]

	now := time.Now()
	p, sizes := openPartition(t, now.UnixMilli()-120_000, now.UnixMilli()-60_000, now.UnixMilli())
	p1, _ := openPartition(t, now.UnixMilli())
	// Partition 2: 3 batches of 2 records, the first deleted by retention.
	p2, sizes2 := openPartition(t, now.UnixMilli()-30_000, now.UnixMilli()-20_000, now.UnixMilli()-10_000)
	if err := p2.DeleteHead(2); err != nil {
		t.Fatal(err)
	}
	parts := []Partition{p, p1, p2}
	tr, err := New(Config{
		Committed: func() []Committed {
			return []Committed{
				{TenantID: tn.Tenant.ID, Group: "workers", TopicID: topic.ID, Partition: 0, Offset: 2, CommittedAt: now},
				{TenantID: tn.Tenant.ID, Group: "workers", TopicID: topic.ID, Partition: 1, Offset: 2, CommittedAt: now},
			}
		},
		Partition: func(id string, part int32) (Partition, bool) {
			if id != topic.ID || part < 0 || int(part) >= len(parts) {
				return nil, false
			}
			return parts[part], true
		},
		Topic: func(id string) (*wire.Topic, bool) { return syncer.View().TopicByID(id) },
		Now:   func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b1", API: cell,
		DataDir: t.TempDir(), Groups: tr.Report})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.ReportOnce(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := tn.Key.Group(ctx, "workers")
	if err != nil || len(g.Partitions) != 3 || g.PartitionCount != 3 || g.LagRecords != 8 {
		t.Fatalf("group: %+v %v", g, err)
	}
	if gp := g.Partitions[2]; gp.Partition != 2 || gp.CommittedOffset != nil || gp.CommittedAt != nil || !gp.Measured ||
		gp.HighWatermark != 6 || gp.LogStartOffset != 2 || gp.LagRecords != 4 || gp.LagBytes != sizes2[1]+sizes2[2] ||
		gp.LagSeconds != 20 || gp.Expired {
		t.Fatalf("partition without a commit: %+v", gp)
	}
	gp := g.Partitions[0]
	if gp.Topic != "orders" || gp.CommittedOffset == nil || *gp.CommittedOffset != 2 || !gp.Measured || gp.HighWatermark != 6 || gp.LagRecords != 4 ||
		gp.LagBytes != sizes[1]+sizes[2] || gp.LagSeconds != 60 || gp.RetentionFraction != 60.0/3600 || gp.Expired {
		t.Fatalf("partition lag: %+v", gp)
	}
	if gs, err := other.Key.Groups(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("another tenant sees %+v %v", gs, err)
	}
}
