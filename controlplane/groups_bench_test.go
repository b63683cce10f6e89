package controlplane_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// BenchmarkCellReportGroups: one broker report carrying 1,000 group lag
// rows (10 groups on each of 100 partitions), stored over HTTP into
// Postgres; every op moves every committed offset.
func BenchmarkCellReportGroups(b *testing.B) {
	const parts, groupsPer = 100, 10
	cp := cptest.Start(b, cptest.Brokers{})
	ctx := context.Background()
	res, err := cptest.SignUp(ctx, cp.Anon, cp.MailDir, api.SignupRequest{TenantName: "bench", Email: "bench@example.com", Password: "password-bench-1", Plan: "standard"})
	if err != nil {
		b.Fatal(err)
	}
	owner := cp.Anon.With(client.WithSession(res.Session.Token))
	if _, err := owner.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: parts}); err != nil {
		b.Fatal(err)
	}
	var topicID string
	if err := cp.DB.QueryRow(ctx, `SELECT id FROM topics WHERE tenant_id = $1`, res.Tenant.ID).Scan(&topicID); err != nil {
		b.Fatal(err)
	}
	cell := cp.CellClient()
	rows := make([]wire.GroupLag, 0, parts*groupsPer)
	for g := range groupsPer {
		for p := range parts {
			rows = append(rows, wire.GroupLag{TenantID: res.Tenant.ID, Group: fmt.Sprintf("group-%d", g), TopicID: topicID,
				Partition: p, Measured: true, HighWatermark: 1 << 20})
		}
	}
	rep := wire.Report{Version: wire.Version, BrokerID: cptest.Cell + "-b1", Partitions: []wire.PartitionStatus{}, Groups: rows}
	i := int64(0)
	b.ResetTimer()
	for b.Loop() {
		i++
		for k := range rows {
			rows[k].CommittedOffset, rows[k].LagRecords = i, 1<<20-i
		}
		if err := cell.CellReport(ctx, cptest.Cell, rep); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var n int
	if err := cp.DB.QueryRow(ctx, `SELECT count(*) FROM group_lag WHERE committed_offset = $1`, i).Scan(&n); err != nil || n != len(rows) {
		b.Fatalf("stored %d rows of the last report (%v), want %d", n, err, len(rows))
	}
}
