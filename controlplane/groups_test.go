package controlplane_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// reportGroups sends broker's report of its groups' lag.
func reportGroups(t *testing.T, cell *client.Client, broker string, rows ...wire.GroupLag) {
	t.Helper()
	rep := wire.Report{Version: wire.Version, BrokerID: broker, Partitions: []wire.PartitionStatus{}, Groups: rows}
	if err := cell.CellReport(context.Background(), "cell-1", rep); err != nil {
		t.Fatalf("report of %s: %v", broker, err)
	}
}

func topicID(t *testing.T, e *env, tenantID, name string) string {
	t.Helper()
	var id string
	if err := e.db.QueryRow(context.Background(), `SELECT id FROM topics WHERE tenant_id = $1 AND name = $2`, tenantID, name).Scan(&id); err != nil {
		t.Fatalf("topic %s: %v", name, err)
	}
	return id
}

// Brokers report their groups' lag; the control plane keeps each broker's
// newest report and answers GET /v1/groups and /v1/groups/{group} from it,
// per tenant.
func TestGroupLagReportToAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.signup("lag-a"), e.signup("lag-b")
	aOrders, aAudit, bOrders := e.createTopic(a, "orders", 2), e.createTopic(a, "audit", 1), e.createTopic(b, "orders", 1)
	cell := e.cellClient()
	committedAt := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	w0 := wire.GroupLag{TenantID: a.Tenant.ID, Group: "workers", TopicID: aOrders, Partition: 0, CommittedOffset: 90, CommittedAt: committedAt,
		Measured: true, HighWatermark: 100, LagRecords: 10, LagBytes: 1000, LagSeconds: 30, RetentionFraction: 0.25}
	w1 := wire.GroupLag{TenantID: a.Tenant.ID, Group: "workers", TopicID: aOrders, Partition: 1, CommittedOffset: 3,
		Measured: true, HighWatermark: 50, LogStartOffset: 20, LagRecords: 30, LagBytes: 3000, LagSeconds: 7200, RetentionFraction: 1, Expired: true}
	bill := wire.GroupLag{TenantID: a.Tenant.ID, Group: "billing", TopicID: aAudit, Partition: 0, CommittedOffset: 5}
	bw := wire.GroupLag{TenantID: b.Tenant.ID, Group: "workers", TopicID: bOrders, Partition: 0, CommittedOffset: 1,
		Measured: true, HighWatermark: 2, LagRecords: 1, LagBytes: 70, LagSeconds: 1, RetentionFraction: 0.001}
	reportGroups(t, cell, "cell-1-b1", w0, w1, bill, bw,
		// Skipped: A's group naming B's topic, a deleted topic, a partition
		// the topic does not have, a name Postgres cannot hold.
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "workers", TopicID: bOrders, Partition: 0, CommittedOffset: 1},
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "workers", TopicID: "tp_gone", Partition: 0},
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "workers", TopicID: aOrders, Partition: 7},
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "bad\x00name", TopicID: aOrders, Partition: 0},
		// A repeated row: the last one counts.
		bw)

	groups, err := a.key.Groups(ctx)
	if err != nil || len(groups) != 2 {
		t.Fatalf("A's groups: %+v %v", groups, err)
	}
	if g := groups[0]; g.Group != "billing" || g.PartitionCount != 1 || g.LagRecords != 0 || g.Expired {
		t.Fatalf("billing: %+v", g)
	}
	if g := groups[1]; g.Group != "workers" || g.PartitionCount != 2 || g.LagRecords != 40 || g.LagBytes != 4000 ||
		g.MaxLagSeconds != 7200 || g.MaxRetentionFraction != 1 || !g.Expired || g.ReportedAt.IsZero() || g.Partitions != nil {
		t.Fatalf("workers: %+v", g)
	}
	var page api.Page[api.Group]
	if err := a.key.Do(ctx, http.MethodGet, "/v1/groups?limit=1", nil, &page); err != nil || len(page.Items) != 1 || page.NextPageToken == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	var page2 api.Page[api.Group]
	if err := a.key.Do(ctx, http.MethodGet, "/v1/groups?limit=1&page_token="+page.NextPageToken, nil, &page2); err != nil ||
		len(page2.Items) != 1 || page2.Items[0].Group != "workers" || page2.NextPageToken != "" {
		t.Fatalf("second page: %+v %v", page2, err)
	}

	g, err := a.key.Group(ctx, "workers")
	if err != nil || len(g.Partitions) != 2 || g.LagRecords != 40 {
		t.Fatalf("A's workers: %+v %v", g, err)
	}
	p0, p1 := g.Partitions[0], g.Partitions[1]
	if p0.Topic != "orders" || p0.Partition != 0 || p0.CommittedOffset == nil || *p0.CommittedOffset != 90 || p0.CommittedAt == nil || !p0.CommittedAt.Equal(committedAt) ||
		!p0.Measured || p0.HighWatermark != 100 || p0.LagRecords != 10 || p0.LagBytes != 1000 || p0.LagSeconds != 30 ||
		p0.RetentionFraction != 0.25 || p0.Expired || p0.ReportedAt.IsZero() {
		t.Fatalf("partition 0: %+v", p0)
	}
	if p1.Partition != 1 || p1.CommittedAt != nil || p1.LogStartOffset != 20 || !p1.Expired || p1.RetentionFraction != 1 {
		t.Fatalf("partition 1: %+v", p1)
	}
	// B's group of the same name is B's alone.
	g, err = b.key.Group(ctx, "workers")
	if err != nil || len(g.Partitions) != 1 || g.LagRecords != 1 || g.Partitions[0].Topic != "orders" {
		t.Fatalf("B's workers: %+v %v", g, err)
	}
	if _, err := b.key.Group(ctx, "billing"); !client.IsCode(err, "group_not_found") {
		t.Fatalf("B reads A's billing: %v", err)
	}

	// Another broker takes over workers; b1 then reports only billing: A's
	// workers stays (b2's now), B's workers goes with b1's report.
	w0.CommittedOffset, w0.LagRecords = 95, 5
	reportGroups(t, cell, "cell-1-b2", w0, w1)
	reportGroups(t, cell, "cell-1-b1", bill)
	if g, err := a.key.Group(ctx, "workers"); err != nil || g.LagRecords != 35 || g.Partitions[0].CommittedOffset == nil || *g.Partitions[0].CommittedOffset != 95 {
		t.Fatalf("workers after the move: %+v %v", g, err)
	}
	if gs, err := b.key.Groups(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("B's groups after b1 stopped reporting them: %+v %v", gs, err)
	}
	// A deleted topic takes its groups' rows with it.
	if err := a.key.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.key.Group(ctx, "workers"); !client.IsCode(err, "group_not_found") {
		t.Fatalf("workers after its topic was deleted: %v", err)
	}
	// A report without groups (a broker that coordinates none) clears the broker's.
	if err := cell.CellReport(ctx, "cell-1", wire.Report{Version: wire.Version, BrokerID: "cell-1-b1", Partitions: []wire.PartitionStatus{}}); err != nil {
		t.Fatal(err)
	}
	if gs, err := a.key.Groups(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("A's groups at the end: %+v %v", gs, err)
	}
	st, ae, _ := e.raw("GET", "/v1/groups/nope", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.keyID+":"+a.secret)), "", "")
	if st != http.StatusNotFound || ae.Code != "group_not_found" {
		t.Fatalf("missing group: %d %+v", st, ae)
	}
}

// A group lists the partitions it has not committed on (reported with
// committed offset -1): committed_offset null, lag the whole retained log,
// counted in the group's totals.
func TestGroupPartitionWithoutCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("lag-uncommitted")
	orders := e.createTopic(a, "orders", 3)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	reportGroups(t, e.cellClient(), "cell-1-b1",
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "audit", TopicID: orders, Partition: 0, CommittedOffset: 5, CommittedAt: at,
			Measured: true, HighWatermark: 5},
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "audit", TopicID: orders, Partition: 1, CommittedOffset: 2, CommittedAt: at,
			Measured: true, HighWatermark: 4, LagRecords: 2},
		wire.GroupLag{TenantID: a.Tenant.ID, Group: "audit", TopicID: orders, Partition: 2, CommittedOffset: -1,
			Measured: true, HighWatermark: 9, LogStartOffset: 3, LagRecords: 6, LagBytes: 600, LagSeconds: 12})

	var raw map[string]any
	if err := a.key.Do(ctx, http.MethodGet, "/v1/groups/audit", nil, &raw); err != nil {
		t.Fatal(err)
	}
	parts, _ := raw["partitions"].([]any)
	if raw["partition_count"] != float64(3) || raw["lag_records"] != float64(8) || len(parts) != 3 {
		t.Fatalf("group: %v", raw)
	}
	for i, want := range []any{float64(5), float64(2), nil} {
		p := parts[i].(map[string]any)
		v, present := p["committed_offset"]
		if !present || v != want {
			t.Errorf("partition %d: committed_offset %v (present %v), want %v", i, v, present, want)
		}
	}
	p2 := parts[2].(map[string]any)
	if _, ok := p2["committed_at"]; ok || p2["lag_records"] != float64(6) || p2["log_start_offset"] != float64(3) {
		t.Fatalf("partition without a commit: %v", p2)
	}
	gs, err := a.key.Groups(ctx)
	if err != nil || len(gs) != 1 || gs[0].PartitionCount != 3 || gs[0].LagRecords != 8 {
		t.Fatalf("groups: %+v %v", gs, err)
	}
}
