package launch_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// BenchmarkMoveTwelvePartitions moves all 12 partitions of a tenant's
// topic from brokers 1, 2, 3 to 4, 5, 6 of a cell of six real broker
// processes at once (the control plane allows one unfinished move per
// partition, so all 12), while the tenant produces at a paced rate
// (SLUICE_MOVE_BENCH_MBPS, default 20 MB/s, over 4 producers each
// keeping up to 8,192 records of 1 KiB in flight, round-robin over the
// partitions) and a consumer group reads
// the topic, and another tenant on the same brokers produces one record
// at a time. It reports the moves' total duration, the tenant's per-
// producer acknowledgement gaps during the moves (p99 and max), the
// group's lag (records acknowledged but not yet polled) before and during
// the moves, and the other tenant's produce p99 before and during. One
// run whatever b.N (-benchtime 1x); about two minutes.
func BenchmarkMoveTwelvePartitions(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a control plane and six brokers")
	}
	const parts = 12
	cfg := benchLoadConfig{producers: 4, batch: 32, recSize: 1024, mbps: mbpsFromEnv(b, "SLUICE_MOVE_BENCH_MBPS", 20)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startProcCell(b, "movebench", 6)
	op := c.cp.Operator
	// Brokers 4, 5, 6 out of placement while the topics are created, so
	// every partition lands on 1, 2, 3.
	setStatus := func(st string) {
		for _, id := range []string{"b4", "b5", "b6"} {
			if _, err := op.AdminUpdateBroker(ctx, id, api.UpdateBrokerRequest{Status: &st}); err != nil {
				b.Fatal(err)
			}
		}
	}
	c.liftQuotas(ctx)
	setStatus("draining")
	c.createTopic(ctx, "hot", parts)
	other := c.otherTenant(ctx, "movebench-other", "quiet", 3)
	setStatus("active")
	tp, err := c.tenant.Client.Topic(ctx, "hot")
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range tp.Assignments {
		if r := slices.Sorted(slices.Values(a.Replicas)); !slices.Equal(r, []int{1, 2, 3}) {
			b.Fatalf("partition %d is on %v, not 1, 2, 3", a.Partition, a.Replicas)
		}
	}
	topicID := c.topicID(ctx, "hot")

	load := c.startBenchLoad(ctx, other, cfg)
	before := load.warmUp(ctx, b)

	b.ResetTimer()
	started := time.Now()
	var ids []int64
	for _, a := range tp.Assignments {
		target := make([]int, len(a.Replicas))
		for i, n := range a.Replicas {
			target[i] = n + 3
		}
		var mv api.Move
		// A broker's report may briefly lack a replica's Raft
		// configuration (unavailable): the next one has it.
		if err := launch.WaitFor(ctx, fmt.Sprintf("move of partition %d created", a.Partition), time.Minute, func() error {
			var err error
			if mv, err = op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: a.Partition, Replicas: target}); err != nil {
				if !client.IsCode(err, "unavailable") {
					b.Fatal(err)
				}
				b.Logf("move of partition %d refused, trying again: %v", a.Partition, err)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, mv.ID)
	}
	if err := launch.WaitFor(ctx, "all 12 moves completed", 8*time.Minute, func() error {
		ms, err := op.AdminMoves(ctx, client.MoveFilter{State: "completed"})
		if err != nil {
			return err
		}
		if len(ms) < len(ids) {
			return fmt.Errorf("%d of %d completed", len(ms), len(ids))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s := load.finish(ctx, before, started)
	s.report(b, cfg, "the moves")
	b.ReportMetric(pct(s.hot, 0.99).Seconds()*1e3, "produce_p99_ms")
	b.ReportMetric(pct(s.hot, 1).Seconds()*1e3, "produce_max_ms")
	b.ReportMetric(pct(s.gaps, 1).Seconds()*1e3, "ack_gap_max_ms")
	b.Logf("12 moves in %v; the tenant's records sent during the moves, send to acknowledgement: p50 %v p99 %v max %v (%d records); longest time any of the %d producers went without an acknowledgement %v",
		s.during.to.Sub(started).Round(10*time.Millisecond), pct(s.hot, 0.5), pct(s.hot, 0.99), pct(s.hot, 1), len(s.hot), cfg.producers, pct(s.gaps, 1))
}
