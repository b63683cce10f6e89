package replicas

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// compactLoop runs CompactionPass every CompactInterval (passLoop). Close
// stops it.
func (m *Manager) compactLoop() { m.passLoop(m.cfg.CompactInterval, m.CompactionPass) }

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
		before := r.CompactionStats()
		err := r.CompactionPass(pctx, m.cfg.Now(), m.cfg.CleanerRate)
		cancel()
		m.cleaner.add(k, before, r.CompactionStats())
		if err != nil && !gone(err) && ctx.Err() == nil {
			m.cfg.Logger.Warn("compaction pass failed", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
	m.cleaner.mu.Lock()
	for k := range m.cleaner.dirty {
		if _, ok := reps[k]; !ok {
			delete(m.cleaner.dirty, k)
		}
	}
	m.cleaner.mu.Unlock()
}

// cleanerTotals are the cleaner's work on this broker since it started,
// summed over replicas (a replica's own stats start again when it
// reopens), and the dirty ratio each compacted partition's leader here
// last measured. mu guards the fields.
type cleanerTotals struct {
	mu                  sync.Mutex
	cleanings, passes   int64
	bytesRead, bytesOut int64
	seconds             float64
	dirty               map[key]float64
}

func (c *cleanerTotals) add(k key, before, after partition.CompactionStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanings += int64(after.Cleanings - before.Cleanings)
	c.passes += int64(after.Passes - before.Passes)
	c.bytesRead += after.BytesRead - before.BytesRead
	c.bytesOut += after.BytesWritten - before.BytesWritten
	c.seconds += (after.Duration - before.Duration).Seconds()
	if c.dirty == nil {
		c.dirty = map[key]float64{}
	}
	c.dirty[k] = after.DirtyRatio
}

// NewCompactionMetrics returns the broker's cleaner metrics, read from the
// Manager current returns (nil: zeros). They carry no labels: the dirty
// ratio is the largest among the compacted partitions led here.
func NewCompactionMetrics(current func() *Manager) []prometheus.Collector {
	read := func(f func(*cleanerTotals) float64) func() float64 {
		return func() float64 {
			m := current()
			if m == nil {
				return 0
			}
			m.cleaner.mu.Lock()
			defer m.cleaner.mu.Unlock()
			return f(&m.cleaner)
		}
	}
	counter := func(name, help string, f func(*cleanerTotals) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read(f))
	}
	return []prometheus.Collector{
		counter("sluice_cleaner_cleanings_total", "Compactions (log.Clean runs) this broker's replicas finished since the broker started.",
			func(c *cleanerTotals) float64 { return float64(c.cleanings) }),
		counter("sluice_cleaner_passes_total", "Key-map passes of those compactions.",
			func(c *cleanerTotals) float64 { return float64(c.passes) }),
		counter("sluice_cleaner_read_bytes_total", "Segment bytes the cleaner read.",
			func(c *cleanerTotals) float64 { return float64(c.bytesRead) }),
		counter("sluice_cleaner_written_bytes_total", "Segment bytes the cleaner wrote.",
			func(c *cleanerTotals) float64 { return float64(c.bytesOut) }),
		counter("sluice_cleaner_seconds_total", "Seconds the cleaner spent compacting.",
			func(c *cleanerTotals) float64 { return c.seconds }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_cleaner_max_dirty_ratio",
			Help: "The largest share of closed segment bytes past the last compaction among the compacted partitions this broker leads, as last measured.",
		}, read(func(c *cleanerTotals) float64 {
			mx := 0.0
			for _, r := range c.dirty {
				mx = math.Max(mx, r)
			}
			return mx
		})),
	}
}
