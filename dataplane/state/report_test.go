package state_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/state"
)

func TestReporterRecordsDisk(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	dir := t.TempDir()
	r, err := state.NewReporter(state.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b2", API: cp.CellClient(), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReportOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	used, total, err := state.DiskUsage(dir)
	if err != nil || total <= 0 || used <= 0 || used > total {
		t.Fatalf("DiskUsage = %d/%d %v", used, total, err)
	}
	c, err := cp.Operator.AdminCell(context.Background(), cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Brokers[1]
	if b.LastSeenAt == nil || b.DiskTotalBytes != total {
		t.Fatalf("broker after report: %+v (statfs total %d)", b, total)
	}
}
