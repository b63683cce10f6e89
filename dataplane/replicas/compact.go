package replicas

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// The broker's cleaner: one goroutine per Manager that runs a compaction
// pass over every replica of a compacted topic (partition.CompactionPass):
// leaders replicate rolls and compaction decisions, every replica cleans
// with the decision it holds. The replicas share one byte budget a second
// (Config.CleanerRate), taken in turn, so the cleaner never takes more
// disk bandwidth than that from produce and fetch; it runs off Raft's
// apply path and never touches an active segment.

// DefaultCompactInterval is how often the cleaner passes over the
// replicas (Config.CompactInterval).
const DefaultCompactInterval = 15 * time.Second

// DefaultCleanerRate is the cleaner's read-plus-write budget in bytes a
// second for the whole broker (Config.CleanerRate). At 32 MiB/s a
// replica's cleaner running flat out multiplied produce p99 by about 20 on
// the benchmark machine; at 8 MiB/s by about 2 (docs/benchmarks.md,
// BenchmarkProduceWhileCleaning).
const DefaultCleanerRate = 8 << 20

// compactLoop runs CompactionPass every CompactInterval, jittered by up to
// a fifth either way. Close stops it.
func (m *Manager) compactLoop() {
	defer m.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.stop
		cancel()
	}()
	for {
		d := time.Duration(float64(m.cfg.CompactInterval) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(d)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
		m.CompactionPass(ctx)
	}
}

// CompactionPass runs one cleaner pass over every replica of a compacted
// topic, one replica at a time, with Config.Now as the leaders' clock.
func (m *Manager) CompactionPass(ctx context.Context) {
	m.mu.RLock()
	reps := make(map[key]*partition.Replica, len(m.replicas))
	for k, r := range m.replicas {
		if r.Settings().Log.Compacted {
			reps[k] = r
		}
	}
	m.mu.RUnlock()
	for k, r := range reps {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, m.cfg.CompactTimeout)
		err := r.CompactionPass(pctx, m.cfg.Now(), m.cfg.CleanerRate)
		cancel()
		if err != nil && !gone(err) && ctx.Err() == nil {
			m.cfg.Logger.Warn("compaction pass failed", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
}
