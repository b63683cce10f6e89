package replicated

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// benchRangeSink records a bench partition's closed ranges into its
// broker's meter, as replicas' sink does in tenantd.
type benchRangeSink struct {
	m    *usage.Meter
	part int32
}

func (s benchRangeSink) RecordRange(ctx context.Context, r partition.MeterRange) error {
	return s.m.RecordRange(ctx, usage.Range{Tenant: "bench", Topic: "bench", Partition: s.part, End: r.End, Hour: r.Hour, Bytes: r.Bytes, Messages: r.Records})
}

// BenchmarkProduceMetered is BenchmarkProduceReplicated (buffer=1000)
// with metering off and on in the same run. On, as tenantd wires it: the
// bench partitions' leaders close their produce sums through Raft every
// partition.DefaultMeterInterval and record each closed range into their
// broker's usage.Meter, whose flusher writes into a Raft group of the same
// cell (groups 3 to 5, one led by each broker, as the cell's usage
// partitions are); the listener counts fetches into the same meter. No
// produce response waits for metering.
func BenchmarkProduceMetered(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metering=%v", on), func(b *testing.B) {
			opts := cellOptions{groups: 2 * benchParts}
			var c *cell
			var flushers []*usage.Flusher
			meters := []*usage.Meter{usage.NewMeter(nil), usage.NewMeter(nil), usage.NewMeter(nil)}
			if on {
				opts.meter = func(br, g int) partition.MeterSink {
					if g >= benchParts {
						return nil // the usage groups
					}
					return benchRangeSink{meters[br], int32(g)}
				}
				opts.configure = func(br int, cfg *kafka.Config) {
					m := meters[br]
					f, err := usage.NewFlusher(usage.FlusherConfig{NodeID: br + 1, Meter: m, Partition: func() (usage.Appender, bool) {
						for _, g := range []int{benchParts + br, benchParts, benchParts + 1, benchParts + 2} {
							if r := c.cell.Replica(br, g); r != nil && r.IsLeader() {
								return r, true
							}
						}
						return nil, false
					}})
					if err != nil {
						b.Fatal(err)
					}
					flushers = append(flushers, f)
					cfg.Usage = m
				}
			}
			var tn *cptest.Tenant
			c, tn = startCellWith(b, benchParts, "bench", opts)
			defer func() {
				for _, f := range flushers {
					_ = f.Close()
				}
			}()
			celltest.WaitFor(b, 30*time.Second, "every partition led by its preferred broker", func() bool {
				for p := 0; p < benchParts; p++ {
					if c.cell.Leader(p) != p {
						return false
					}
				}
				return true
			})
			prod := c.client(b, tn, kgo.DefaultProduceTopic("bench"), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1000),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			lat, el := produceMeasured(b, prod)
			if on {
				// Metering ran: every bench partition closes (and
				// records) all it holds within a few intervals.
				celltest.WaitFor(b, 30*time.Second, "every bench partition's produce closed", func() bool {
					for p := 0; p < benchParts; p++ {
						r := c.cell.Replica(p, p)
						if closed, pending := r.MeterClosed(); pending || closed.End != r.HighWatermark() {
							return false
						}
					}
					return true
				})
			}
			reportProduce(b, lat, el)
		})
	}
}
