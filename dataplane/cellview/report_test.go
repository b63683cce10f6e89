package cellview_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

func TestReporterRecordsDisk(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	dir := t.TempDir()
	r, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b2", API: cp.CellClient(), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReportOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	used, total, err := cellview.DiskUsage(dir)
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

// A request on Soon sends a report without waiting for the interval: with
// an interval of an hour, the second report can only be the one asked for.
func TestReporterReportsSoonWhenAsked(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	var reports atomic.Int64
	soon := make(chan struct{}, 1)
	ask := func() {
		select {
		case soon <- struct{}{}:
		default:
		}
	}
	runReporter(t, cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b1", API: cp.CellClient(),
		DataDir: t.TempDir(), Every: time.Hour, Soon: soon, MinGap: time.Millisecond,
		Groups: func() []wire.GroupLag { reports.Add(1); return nil }})
	celltest.WaitFor(t, 30*time.Second, "the first report", func() bool { return reports.Load() == 1 })
	ask()
	celltest.WaitFor(t, 30*time.Second, "the report asked for", func() bool { return reports.Load() == 2 })
	for range 3 {
		ask()
	}
	celltest.WaitFor(t, 30*time.Second, "the report for the three requests", func() bool { return reports.Load() >= 3 })
	c, err := cp.Operator.AdminCell(context.Background(), cptest.Cell)
	if err != nil || c.Brokers[0].LastSeenAt == nil {
		t.Fatalf("the control plane has not heard from the broker: %+v %v", c, err)
	}
}

// TestReporterFastGap: while Fast says so, a report asked for leaves
// FastGap after the previous one, not MinGap (an hour here).
func TestReporterFastGap(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	var reports atomic.Int64
	soon := make(chan struct{}, 1)
	runReporter(t, cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b1", API: cp.CellClient(),
		DataDir: t.TempDir(), Every: time.Hour, Soon: soon, MinGap: time.Hour, FastGap: time.Millisecond,
		Fast:   func() bool { return true },
		Groups: func() []wire.GroupLag { reports.Add(1); return nil }})
	celltest.WaitFor(t, 30*time.Second, "the first report", func() bool { return reports.Load() == 1 })
	soon <- struct{}{}
	celltest.WaitFor(t, 30*time.Second, "the report asked for, FastGap after the first", func() bool { return reports.Load() == 2 })
}

// runReporter runs a reporter of cfg until the test ends, when it must
// stop with the context's cancellation.
func runReporter(t *testing.T, cfg cellview.ReporterConfig) {
	t.Helper()
	r, err := cellview.NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	})
}
