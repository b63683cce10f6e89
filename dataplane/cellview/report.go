package cellview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	Cell     string
	BrokerID string
	// API carries the cell key; required.
	API *client.Client
	// DataDir is the filesystem whose use is reported; required.
	DataDir string
	// Partitions returns the broker's replicas' status; nil reports none.
	Partitions func() []wire.PartitionStatus
	// Groups returns the lag of the groups the broker coordinates (every
	// one, each report: the control plane drops the broker's groups that a
	// report leaves out); nil reports none.
	Groups func() []wire.GroupLag
	// DiskState, when set, reports the data disk against the broker's
	// watermarks ("ok", "soft" or "hard"); the control plane places no
	// partitions on a cell with a broker above soft.
	DiskState func() string
	// KeysUsed, when set, returns the API keys used on the broker since
	// the last call (Syncer.TakeKeysUsed); the control plane notes their
	// use. Keys of a report that fails are noted again on their next use.
	KeysUsed func() []string
	// OffsetsImported, when set, returns the offsets partitions this
	// broker leads that hold a moving tenant's imported offsets
	// (groups.Coordinator.OffsetsImported).
	OffsetsImported func() []wire.OffsetsImport
	// HTTPScheme is the scheme of the broker's HTTP data API ("http" or
	// "https"), reported so the control plane lists usable endpoints;
	// empty reports none (taken as http).
	HTTPScheme string
	// StateVersion, when set, is the cell state version the broker's
	// replicas applied last (wire.Report.StateVersion).
	StateVersion func() int64
	// Moves: the broker takes part in tenant moves (wire.Report.Moves).
	Moves bool
	// Every is the reporting interval (default 5 s).
	Every time.Duration
	// Soon, when set, asks for a report before the interval ends: each
	// receive sends one report, MinGap after the previous one at the
	// earliest, covering every request that arrived meanwhile. The group
	// coordinator asks when a group appears, so its lag shows within about
	// a second rather than an interval.
	Soon <-chan struct{}
	// MinGap is the least time between a report and one Soon asks for
	// (default 500 ms), so requests cost at most two reports a second.
	MinGap time.Duration
	// Fast, when set and true, makes FastGap the least time between
	// reports instead of MinGap: tenantd sets it while its cell state
	// names a tenant move, whose steps the control plane takes on reports
	// while the tenant's producers wait.
	Fast func() bool
	// FastGap is MinGap while Fast reports true (default 50 ms).
	FastGap time.Duration
	Logger  *slog.Logger
}

// Reporter sends a broker's observations to the control plane
// periodically, and sooner when asked (ReporterConfig.Soon). One goroutine
// (Run) sends every report, so the control plane receives them in order.
type Reporter struct{ cfg ReporterConfig }

// NewReporter checks cfg and fills its defaults.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	if cfg.Cell == "" || cfg.BrokerID == "" || cfg.API == nil || cfg.DataDir == "" {
		return nil, errors.New("reporter config: Cell, BrokerID, API and DataDir are required")
	}
	if cfg.Every == 0 {
		cfg.Every = 5 * time.Second
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = 500 * time.Millisecond
	}
	if cfg.FastGap == 0 {
		cfg.FastGap = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Reporter{cfg: cfg}, nil
}

// Run reports now, then every interval and whenever Soon asks, until ctx
// ends; never two reports less than MinGap (FastGap while Fast) apart.
func (r *Reporter) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	gap := time.NewTimer(r.cfg.MinGap)
	defer gap.Stop()
	for {
		// This report answers every request and tick already made.
		select {
		case <-r.cfg.Soon:
		default:
		}
		select {
		case <-t.C:
		default:
		}
		if err := r.ReportOnce(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("report to control plane", "err", err)
		}
		gap.Reset(r.minGap())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-r.cfg.Soon:
		}
		select { // at once if MinGap has passed since the report
		case <-ctx.Done():
			return ctx.Err()
		case <-gap.C:
		}
	}
}

// minGap is the least time until the next report: FastGap while
// ReporterConfig.Fast says so, else MinGap.
func (r *Reporter) minGap() time.Duration {
	if r.cfg.Fast != nil && r.cfg.Fast() {
		return r.cfg.FastGap
	}
	return r.cfg.MinGap
}

// ReportOnce sends one report.
func (r *Reporter) ReportOnce(ctx context.Context) error {
	used, total, err := DiskUsage(r.cfg.DataDir)
	if err != nil {
		return err
	}
	rep := wire.Report{Version: wire.Version, BrokerID: r.cfg.BrokerID, DiskUsedBytes: used, DiskTotalBytes: total,
		Partitions: []wire.PartitionStatus{}, HTTPScheme: r.cfg.HTTPScheme, Moves: r.cfg.Moves}
	// The state version is read before the groups: a tenant moving away
	// takes its final offsets from the first report at or past the
	// switch's version, so that report's groups must be read after the
	// broker applied it (groups.Coordinator refuses later commits).
	if r.cfg.StateVersion != nil {
		rep.StateVersion = r.cfg.StateVersion()
	}
	if r.cfg.Partitions != nil {
		rep.Partitions = r.cfg.Partitions()
	}
	if r.cfg.Groups != nil {
		rep.Groups = r.cfg.Groups()
	}
	if r.cfg.DiskState != nil {
		rep.DiskState = r.cfg.DiskState()
	}
	if r.cfg.KeysUsed != nil {
		rep.KeysUsed = r.cfg.KeysUsed()
	}
	if r.cfg.OffsetsImported != nil {
		rep.OffsetsImported = r.cfg.OffsetsImported()
	}
	return r.cfg.API.CellReport(ctx, r.cfg.Cell, rep)
}

// DiskUsage returns the used and total bytes of the filesystem holding dir.
func DiskUsage(dir string) (used, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	total = int64(st.Blocks) * st.Bsize
	used = total - int64(st.Bfree)*st.Bsize
	return used, total, nil
}
