package controlplane_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestDiskPressurePlacement: while a broker of a cell reports its disk above
// the soft watermark, topic creation and partition growth on the cell fail
// with cell_disk_pressure and signup picks another cell; once it reports ok
// again, placement resumes.
func TestDiskPressurePlacement(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("diskp")
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "before", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	cell := e.cellClient()
	report := func(state string) error {
		return cell.CellReport(ctx, "cell-1", wire.Report{Version: wire.Version, BrokerID: "cell-1-b2",
			DiskUsedBytes: 85, DiskTotalBytes: 100, DiskState: state, Partitions: []wire.PartitionStatus{}})
	}
	if err := report("full"); !client.IsCode(err, "invalid_request") {
		t.Fatalf("unknown disk state: %v", err)
	}
	if err := report("soft"); err != nil {
		t.Fatal(err)
	}

	if c, err := e.op.AdminCell(ctx, "cell-1"); err != nil || c.Brokers[1].DiskState != "soft" || c.Brokers[0].DiskState != "ok" {
		t.Fatalf("brokers after the report: %+v %v", c.Brokers, err)
	}
	_, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "after", Partitions: 1})
	if !client.IsCode(err, "cell_disk_pressure") || !strings.Contains(err.Error(), "cell-1-b2") {
		t.Fatalf("create topic above soft: %v", err)
	}
	two := 2
	_, err = a.key.UpdateTopic(ctx, "before", api.UpdateTopicRequest{Partitions: &two})
	if !client.IsCode(err, "cell_disk_pressure") {
		t.Fatalf("grow partitions above soft: %v", err)
	}

	// Signup avoids the cell: with no other cell there is none to take.
	_, err = e.signUp(ctx, api.SignupRequest{TenantName: "nocell", Email: "nocell@example.com", Password: "password-nocell-1"})
	if !client.IsCode(err, "no_capacity") {
		t.Fatalf("signup with the only cell above soft: %v", err)
	}
	if _, err := e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "shared-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-2-b1", CellID: "cell-2", NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := e.signUp(ctx, api.SignupRequest{TenantName: "elsewhere", Email: "elsewhere@example.com", Password: "password-elsewhere-1"})
	if err != nil || res.Tenant.HomeCellID != "cell-2" {
		t.Fatalf("signup with cell-1 above soft: %+v %v", res.Tenant, err)
	}

	// Back below soft (the broker reports ok): placement resumes.
	if err := report("ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "after", Partitions: 1}); err != nil {
		t.Fatalf("create topic after recovery: %v", err)
	}
	if _, err := a.key.UpdateTopic(ctx, "before", api.UpdateTopicRequest{Partitions: &two}); err != nil {
		t.Fatalf("grow partitions after recovery: %v", err)
	}
}
