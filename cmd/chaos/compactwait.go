package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compactionWait bounds how long a compacted run waits, before its final
// read, for a read to find that the cleaner has compacted.
const compactionWait = time.Minute

// awaitCompaction waits, for at most limit, until a read of the topic from
// its start finds an offset missing between two records (the cleaner has
// compacted something), so the final read exercises the compaction model
// even when the faults left the cleaner little time: a cell SIGKILLed
// late in the run reopens, elects and only then cleans, which on a loaded
// machine took longer than the quiet spell. The read goes around the
// checker. It reports whether it found a gap; the run's own check decides
// what none means.
func awaitCompaction(ctx context.Context, cfg Config, c *Cluster, limit time.Duration, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if compactedGap(ctx, cfg, c) {
			return true
		}
		log.Info("chaos: no compacted offset read yet; waiting for the cleaner", "every", cfg.CompactInterval)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(cfg.CompactInterval):
		}
	}
}

// compactedGap reads every partition of the topic from its start up to its
// high watermark and reports whether an offset is missing between two
// records it returned.
func compactedGap(ctx context.Context, cfg Config, c *Cluster) bool {
	parts := map[int32]kgo.Offset{}
	for p := range cfg.Partitions {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(c.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}))...)
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next := map[int32]int64{}
	done := map[int32]bool{}
	for len(done) < cfg.Partitions && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		gap := false
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				if n, ok := next[r.Partition]; ok && r.Offset > n {
					gap = true
				}
				next[r.Partition] = r.Offset + 1
			}
			if n, ok := next[p.Partition]; p.Err == nil && (ok && n >= p.HighWatermark || p.HighWatermark == 0) {
				done[p.Partition] = true
			}
		})
		if gap {
			return true
		}
	}
	return false
}
