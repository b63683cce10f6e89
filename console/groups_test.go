package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// reportGroupLag has broker 1 of the cell report the lag of a tenant's
// group on the tenant's topic, as a coordinator would: partition 0 near
// retention, partition 1 caught up, partition 2 not measured, partition 3
// not committed yet (its whole retained log unread).
func (e *env) reportGroupLag(tenantID, topic, group string) {
	e.t.Helper()
	ctx := context.Background()
	var topicID string
	if err := e.db.QueryRow(ctx, `SELECT id FROM topics WHERE tenant_id = $1 AND name = $2`, tenantID, topic).Scan(&topicID); err != nil {
		e.t.Fatal(err)
	}
	ck, err := e.op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		e.t.Fatal(err)
	}
	cell := client.New(e.url, client.WithAPIKey(ck.ID, ck.Secret))
	at := time.Now().Add(-time.Minute)
	rep := wire.Report{Version: wire.Version, BrokerID: cptest.Cell + "-b1", Partitions: []wire.PartitionStatus{}, Groups: []wire.GroupLag{
		{TenantID: tenantID, Group: group, TopicID: topicID, Partition: 0, CommittedOffset: 1200, CommittedAt: at, Measured: true,
			HighWatermark: 98_000, LagRecords: 96_800, LagBytes: 96_800 * 1024, LagSeconds: 150_000, RetentionFraction: 0.87},
		{TenantID: tenantID, Group: group, TopicID: topicID, Partition: 1, CommittedOffset: 4000, CommittedAt: at, Measured: true,
			HighWatermark: 4000},
		{TenantID: tenantID, Group: group, TopicID: topicID, Partition: 2, CommittedOffset: 17, CommittedAt: at},
		{TenantID: tenantID, Group: group, TopicID: topicID, Partition: 3, CommittedOffset: -1, Measured: true,
			HighWatermark: 5150, LogStartOffset: 5000, LagRecords: 150},
	}}
	if err := cell.CellReport(ctx, cptest.Cell, rep); err != nil {
		e.t.Fatal(err)
	}
}

func TestGroupsPages(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signup("groups-co")
	ctx := context.Background()
	me, err := b.api().Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.api().CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	_, body := b.get("/groups")
	wantContains(t, body, "No consumer groups reported yet")

	e.reportGroupLag(me.TenantID, "orders", "order-workers")
	resp, body := b.get("/groups")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `href="/groups/order-workers"`, "<td>96950</td>", "94.5 MiB", "41h40m", "87%",
		"messages may be deleted before this group reads them")

	resp, body = b.get("/groups/order-workers")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="group-partitions"`, "<td>1200</td>", "<td>98000</td>", "<td>4000</td>", "not measured yet",
		`<tr class="warn">`, "87%", `<td>3</td><td><span class="muted">none yet</span></td>`, "<td>5150</td><td>150</td>")

	// Another tenant's group is a missing group.
	other := e.browser()
	other.signup("other-co")
	resp, body = other.get("/groups/order-workers")
	wantStatus(t, resp, body, http.StatusNotFound)
	_, body = other.get("/groups")
	wantContains(t, body, "No consumer groups reported yet")
}
