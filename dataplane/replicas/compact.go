package replicas

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
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
	reps := m.openReplicas(func(r *partition.Replica) bool { return r.Settings().Log.Compacted })
	m.cleaner.mu.Lock()
	names := m.cleaner.names
	m.cleaner.mu.Unlock()
	for k, r := range reps {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, m.cfg.CompactTimeout)
		before := r.CompactionStats()
		err := r.CompactionPass(pctx, m.cfg.Now(), m.cfg.CleanerRate)
		cancel()
		m.cleaner.add(k, names[k.topic], before, r.CompactionStats())
		if err != nil && !gone(err) && ctx.Err() == nil {
			m.cfg.Logger.Warn("compaction pass failed", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
	m.cleaner.mu.Lock()
	for k := range m.cleaner.parts {
		if _, ok := reps[k]; !ok {
			delete(m.cleaner.parts, k)
		}
	}
	m.cleaner.mu.Unlock()
}

// cleanerTotals are the cleaner's work on this broker since it started,
// summed over replicas (a replica's own stats start again when it
// reopens), and per compacted partition with a replica here. mu guards
// the fields.
type cleanerTotals struct {
	mu                  sync.Mutex
	cleanings, passes   int64
	bytesRead, bytesOut int64
	seconds             float64
	// parts are the compacted partitions' own figures, for the labelled
	// metrics: an entry goes when its replica leaves the broker or its
	// topic stops compacting (CompactionPass, Manager.remove).
	parts map[key]*partCleaner
	// names label the compacted topics by id: their tenant and name, from
	// the cell state (noteCleanerNames).
	names map[string]topicName
}

// topicName is a compacted topic's metric labels.
type topicName struct{ tenant, topic string }

// partCleaner is one compacted partition's cleaner figures on this broker
// since its replica opened here.
type partCleaner struct {
	name         topicName
	dirty        float64 // this replica's dirty ratio at its last pass
	cleanedBytes int64   // segment bytes its cleanings rewrote (their size before)
	seconds      float64 // time its cleanings took
}

func (c *cleanerTotals) add(k key, name topicName, before, after partition.CompactionStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanings += int64(after.Cleanings - before.Cleanings)
	c.passes += int64(after.Passes - before.Passes)
	c.bytesRead += after.BytesRead - before.BytesRead
	c.bytesOut += after.BytesWritten - before.BytesWritten
	secs := (after.Duration - before.Duration).Seconds()
	c.seconds += secs
	if c.parts == nil {
		c.parts = map[key]*partCleaner{}
	}
	p := c.parts[k]
	if p == nil {
		p = &partCleaner{}
		c.parts[k] = p
	}
	if name.topic == "" {
		name.topic = k.topic // a topic the cell state does not name (yet)
	}
	p.name, p.dirty = name, after.DirtyRatio
	p.cleanedBytes += after.CleanedBytes - before.CleanedBytes
	p.seconds += secs
}

// drop forgets a partition's figures: its replica left this broker.
func (c *cleanerTotals) drop(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, k)
}

// noteCleanerNames records the tenant and name of every compacted topic
// in v, and of the offsets partitions, for the cleaner's labelled metrics.
func (m *Manager) noteCleanerNames(v *cellview.View, settings map[string]partition.Settings) {
	names := map[string]topicName{groups.OffsetsTopicID: {topic: groups.OffsetsTopicID}}
	for _, t := range v.CellState.Topics {
		if settings[t.ID].Log.Compacted {
			names[t.ID] = topicName{tenant: t.TenantID, topic: t.Name}
		}
	}
	m.cleaner.mu.Lock()
	m.cleaner.names = names
	m.cleaner.mu.Unlock()
}

// NewCompactionMetrics returns the broker's cleaner metrics, read from the
// Manager current returns (nil: zeros): broker-wide counters without
// labels, the largest dirty ratio, and per compacted partition with a
// replica here (cleanerPartitions).
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
			for _, p := range c.parts {
				mx = math.Max(mx, p.dirty)
			}
			return mx
		})),
		cleanerPartitions{current},
	}
}

var (
	cleanerLabels = []string{"tenant", "topic", "partition"}
	descPartDirty = prometheus.NewDesc("sluice_cleaner_partition_dirty_ratio",
		"Share of a compacted partition's closed segment bytes past its last compaction on this broker's replica, as of the cleaner's last pass.", cleanerLabels, nil)
	descPartCleaned = prometheus.NewDesc("sluice_cleaner_partition_cleaned_bytes_total",
		"Segment bytes this broker's replica of a compacted partition rewrote (their size before cleaning), since the replica opened here.", cleanerLabels, nil)
	descPartSeconds = prometheus.NewDesc("sluice_cleaner_partition_seconds_total",
		"Seconds this broker's replica of a compacted partition spent cleaning, since the replica opened here.", cleanerLabels, nil)
)

// cleanerPartitions exports the cleaner's figures per compacted partition
// (tenant id, topic name, partition; the offsets partitions with an empty
// tenant). The series are bounded by the compacted partitions with a
// replica on this broker: a deleting topic has none, and a partition's
// series go when its replica leaves the broker or its topic stops
// compacting.
type cleanerPartitions struct{ current func() *Manager }

func (cleanerPartitions) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPartDirty
	ch <- descPartCleaned
	ch <- descPartSeconds
}

func (c cleanerPartitions) Collect(ch chan<- prometheus.Metric) {
	m := c.current()
	if m == nil {
		return
	}
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	for k, p := range m.cleaner.parts {
		lv := []string{p.name.tenant, p.name.topic, strconv.Itoa(int(k.part))}
		ch <- prometheus.MustNewConstMetric(descPartDirty, prometheus.GaugeValue, p.dirty, lv...)
		ch <- prometheus.MustNewConstMetric(descPartCleaned, prometheus.CounterValue, float64(p.cleanedBytes), lv...)
		ch <- prometheus.MustNewConstMetric(descPartSeconds, prometheus.CounterValue, p.seconds, lv...)
	}
}
