package launch_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
)

// BenchmarkTenantMove moves a hot tenant (one topic of 12 partitions,
// written at a paced SLUICE_TENANT_MOVE_MBPS, default 20 MB/s, by 6
// franz-go producers of 1 KiB records, round robin over the partitions,
// each keeping up to 8,192 in flight, and read by a consumer group) from
// its shared cell of three broker processes to a dedicated pool's cell of
// three more, while a second tenant on the shared cell produces one
// record at a time, about 50 a second. Every client knows only the shared
// cell's bootstrap addresses. SLUICE_TENANT_MOVE_MINAGE sets the hot
// tenant's clients' kgo.MetadataMinAge (franz-go's default is 5 s): how
// soon a client may refresh its metadata after a broker says the
// partition is no longer there. It reports the move's duration and its
// steps, the per-producer longest time without an acknowledgement during
// the move (p50, p99, max), the group's lag before and during, and the
// other tenant's produce latency before and during.
// SLUICE_TENANT_MOVE_DEST_DIR puts the destination cell's data in a
// directory there (a tmpfs stands in for the disks of machines of its
// own: on one machine both cells share one disk);
// SLUICE_TENANT_MOVE_MIRROR_RATE is the destination brokers' -mirror-rate
// (bytes a second each partition pulls; their default is 8 MiB/s), and
// SLUICE_TENANT_MOVE_RATE the move's own copy rate (bytes a second over
// all 12 partitions, api.MoveTenantRequest.BytesPerSec). One run whatever
// b.N (-benchtime 1x); about a minute and a half.
func BenchmarkTenantMove(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a control plane and six brokers in two cells")
	}
	const parts = 12
	cfg := benchLoadConfig{producers: 6, batch: 32, recSize: 1024, mbps: mbpsFromEnv(b, "SLUICE_TENANT_MOVE_MBPS", 20)}
	if v := os.Getenv("SLUICE_TENANT_MOVE_MINAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_MINAGE %q: want a duration", v)
		}
		cfg.opts = append(cfg.opts, kgo.MetadataMinAge(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := startProcCell(b, "tmbench", 3)
	op := c.cp.Operator
	c.liftQuotas(ctx)
	c.createTopic(ctx, "hot", parts)
	other := c.otherTenant(ctx, "tmbench-other", "quiet", 3)
	if v := os.Getenv("SLUICE_TENANT_MOVE_DEST_DIR"); v != "" {
		// The destination cell's data on another filesystem (a tmpfs such
		// as /dev/shm): one machine's stand-in for a cell on machines of
		// its own, whose fsyncs do not queue behind the source cell's.
		d, err := os.MkdirTemp(v, "tmbench-dcell-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		c.cellsDir = d
	}
	if v := os.Getenv("SLUICE_TENANT_MOVE_MIRROR_RATE"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_MIRROR_RATE %q: want bytes a second per partition", v)
		}
		c.cellArgs = []string{"-mirror-rate", v} // the destination's pullers
	}
	var moveRate int64
	if v := os.Getenv("SLUICE_TENANT_MOVE_RATE"); v != "" {
		var err error
		if moveRate, err = strconv.ParseInt(v, 10, 64); err != nil || moveRate < 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_RATE %q: want bytes a second over the move's partitions", v)
		}
	}
	c.addCell(ctx, "tmbench-dedicated", "dedicated", "tmbench-dcell", 3)

	load := c.startBenchLoad(ctx, other, cfg)
	before := load.warmUp(ctx, b)

	b.ResetTimer()
	var mv api.TenantMove
	if err := launch.WaitFor(ctx, "the move starts", time.Minute, func() error {
		var err error
		mv, err = op.AdminMoveTenant(ctx, c.tenant.ID, api.MoveTenantRequest{Pool: "tmbench-dedicated", BytesPerSec: moveRate})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	var timeline []string
	last := ""
	nextLag := started
	// A mirror that cannot catch up with the rate never lets the move
	// leave mirroring: give up after limit, with the lag's course logged.
	limit := 3 * time.Minute
	if v := os.Getenv("SLUICE_TENANT_MOVE_LIMIT"); v != "" {
		var err error
		if limit, err = time.ParseDuration(v); err != nil || limit <= 0 {
			b.Fatalf("SLUICE_TENANT_MOVE_LIMIT %q: want a duration", v)
		}
	}
	if err := launch.WaitFor(ctx, "the tenant move is done", limit, func() error {
		m, err := op.AdminTenantMove(ctx, mv.ID)
		if err != nil {
			return err
		}
		if m.State != last {
			last = m.State
			timeline = append(timeline, fmt.Sprintf("%s %s", m.State, time.Since(started).Round(10*time.Millisecond)))
		}
		if time.Now().After(nextLag) {
			nextLag = nextLag.Add(15 * time.Second)
			var sum, most int64
			for _, p := range m.Partitions {
				if p.Lag != nil {
					sum += *p.Lag
					most = max(most, *p.Lag)
				}
			}
			b.Logf("at %s: %s, mirror lag %d offsets in all, %d at most; %d acknowledged", time.Since(started).Round(time.Second),
				m.State, sum, most, load.ackedN.Load())
		}
		if m.State != "done" {
			return fmt.Errorf("move %d is %s: %s", m.ID, m.State, m.Error)
		}
		mv = m
		return nil
	}); err != nil {
		b.Logf("produced %.1f MB/s in the %v before the move", before.mbps(cfg.recSize), before.to.Sub(before.from).Round(time.Second))
		b.Fatal(err)
	}
	b.StopTimer()
	s := load.finish(ctx, before, started)
	s.report(b, cfg, "the move")
	b.ReportMetric(pct(s.gaps, 0.5).Seconds()*1e3, "gap_p50_ms")
	b.ReportMetric(pct(s.gaps, 0.99).Seconds()*1e3, "gap_p99_ms")
	b.ReportMetric(pct(s.gaps, 1).Seconds()*1e3, "gap_max_ms")
	var slow []string // the five slowest, slowest first (otherDuring is by latency)
	for _, l := range slices.Backward(s.otherDuring[max(len(s.otherDuring)-5, 0):]) {
		slow = append(slow, fmt.Sprintf("%v at +%v", l.d.Round(time.Millisecond), l.at.Sub(started).Round(100*time.Millisecond)))
	}
	b.Logf("MetadataMinAge %q", os.Getenv("SLUICE_TENANT_MOVE_MINAGE"))
	b.Logf("move %d to %s at %d B/s (%d B/s a partition; 0: the brokers' -mirror-rate) in %v: %s", mv.ID, mv.DestCellID, mv.BytesPerSec,
		mv.PartitionBytesPerSec, s.during.to.Sub(started).Round(10*time.Millisecond), strings.Join(timeline, ", "))
	b.Logf("per-producer longest time without an acknowledgement during the move (%d producers): %v", cfg.producers, s.gaps)
	b.Logf("other tenant's slowest produces during the move (sent, from the move's start): %s", strings.Join(slow, ", "))
}
