package replicated

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/quotashare"
	"github.com/sluicehq/sluice/quotas"
)

// TestQuotaAccuracyLargeBatches: a tenant producing at several times a
// 1 MiB/s quota through one client whose batches reach 1 MB (librdkafka's
// and so kcat's default batch.size) gets its quota from the cell as a
// whole. Each batch is a second of the whole cell's quota and three of a
// broker's even share, so a broker's bucket sees its demand in lumps.
//
// What the cell admitted is counted on the brokers: the bytes recorded in
// the window less the growth of the debt still owed, summed over the
// brokers. A broker in debt all along pays back exactly its share, so
// the figure falls short of the quota only where a share went unused.
func TestQuotaAccuracyLargeBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replicated cell for 40 s")
	}
	const quota = 1 << 20
	const window = 40 * time.Second
	rs := startRedis(t)
	qc := startQuotaCell(t, rs.addr(), 3, "lumps", 0)
	tenant := qc.tn.Tenant.ID
	qc.setProduceQuota(t, tenant, quota)
	prod := qc.client(t, qc.tn, kgo.DefaultProduceTopic("lumps"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(8192),
		kgo.ProducerBatchMaxBytes(1_000_000), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	f := produceFlatOut(prod, func(i int) int32 { return int32(i % 3) })
	defer f.stop()

	celltest.WaitFor(t, 30*time.Second, "sharing by demand, every broker's produce bucket in debt", func() bool {
		for _, qb := range qc.brokers {
			if qb.share.Mode() != quotashare.ModeShared || qb.buckets.Debt(tenant, quotas.ProduceBytes, time.Now()) == 0 {
				return false
			}
		}
		return true
	})
	owed := func() (debt, recorded float64) {
		now := time.Now()
		for _, qb := range qc.brokers {
			debt += qb.buckets.Debt(tenant, quotas.ProduceBytes, now)
			recorded += qb.adm.RecordedBytes(tenant, "produce")
		}
		return debt, recorded
	}
	start := time.Now()
	d0, r0 := owed()
	qc.logShares(t, window, 2*time.Second, func() string {
		var line []string
		for _, qb := range qc.brokers {
			l, _ := qb.buckets.Limits(tenant)
			line = append(line, fmt.Sprintf("%.0fk/%.0fk", l[quotas.ProduceBytes].Rate/1e3,
				qb.buckets.Debt(tenant, quotas.ProduceBytes, time.Now())/1e3))
		}
		return fmt.Sprintf("shares/debts %v", line)
	})
	d1, r1 := owed()
	el := time.Since(start)
	paid := (r1 - r0) - (d1 - d0)
	rate := paid / el.Seconds()
	t.Logf("recorded %.0f B, debt %.0f -> %.0f B in %v: %.0f B/s admitted (%.1f%% of the quota)",
		r1-r0, d0, d1, el.Round(time.Millisecond), rate, 100*rate/quota)
	if n := f.failed.Load(); n > 0 {
		t.Fatalf("%d records failed, first: %v", n, f.first.Load())
	}
	if rate < 0.9*quota || rate > 1.02*quota {
		t.Fatalf("cell-wide admitted rate %.0f B/s is not within -10%%/+2%% of the %d B/s quota", rate, quota)
	}
}
