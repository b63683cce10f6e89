package replicas

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// UsageTopicID is the topic id of the cell's internal usage partitions,
// which hold the brokers' usage records (dataplane/usage).
const UsageTopicID = "__usage"

// usageRetention is how long usage records stay in a usage partition: far
// longer than the ledger takes to read them (about a second), so that a
// control plane down for days loses nothing.
const usageRetention = 14 * 24 * time.Hour

var usageSettings = partition.Settings{
	MaxBatchBytes: log.DefaultMaxBatchBytes,
	Log: log.Settings{
		SegmentBytes: 16 << 20,
		SegmentAge:   time.Duration(topicspec.DefaultSegmentMs) * time.Millisecond,
		RetentionAge: usageRetention,
	},
}

// UsagePlacement places the cell's usage partitions: one per broker of
// the cell, numbered by its node id, whose first (preferred-leader)
// replica is that broker and whose other replicas-1 are the brokers with
// the lowest other node ids. So each broker normally leads the partition
// it flushes into, and a broker added to the cell changes no existing
// partition's replicas. It is nil until the state lists replicas
// brokers, like OffsetsPlacement.
func UsagePlacement(v *cellview.View, replicas int) []wire.Partition {
	if replicas <= 0 || len(v.Brokers) < replicas {
		return nil
	}
	nodes := make([]int, 0, len(v.Brokers))
	for _, b := range v.Brokers {
		nodes = append(nodes, b.NodeID)
	}
	slices.Sort(nodes)
	out := make([]wire.Partition, 0, len(nodes))
	for _, n := range nodes {
		p := wire.Partition{Partition: n, Replicas: []int{n}}
		for _, o := range nodes {
			if len(p.Replicas) == replicas {
				break
			}
			if o != n {
				p.Replicas = append(p.Replicas, o)
			}
		}
		out = append(out, p)
	}
	return out
}

// usageWanted adds this broker's usage partitions to want, with their
// settings.
func (m *Manager) usageWanted(v *cellview.View, want map[key]wire.Partition, settings map[string]partition.Settings, planMax map[string]int) {
	for _, p := range UsagePlacement(v, m.cfg.OffsetsReplicas) {
		if slices.Contains(p.Replicas, m.cfg.NodeID) {
			want[key{UsageTopicID, int32(p.Partition)}] = p
		}
	}
	settings[UsageTopicID] = usageSettings
	planMax[UsageTopicID] = usageSettings.MaxBatchBytes
}

// UsageAppender returns a usage partition this broker leads for its
// flusher: its own (numbered by its node id) when it leads it, else any
// other it leads (one whose broker is down); ok is false if it leads none.
func (m *Manager) UsageAppender() (usage.Appender, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if r, ok := m.replicas[key{UsageTopicID, int32(m.cfg.NodeID)}]; ok && r.IsLeader() {
		return r, true
	}
	for k, r := range m.replicas {
		if k.topic == UsageTopicID && r.IsLeader() {
			return r, true
		}
	}
	return nil, false
}

// UsageLed returns the usage partitions this broker leads, for its
// shipper.
func (m *Manager) UsageLed() map[int32]usage.Source {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[int32]usage.Source{}
	for k, r := range m.replicas {
		if k.topic == UsageTopicID && r.IsLeader() {
			out[k.part] = r
		}
	}
	return out
}

// HasUsage reports whether this broker has a replica of a usage partition
// (led or not): none until the cell lists enough brokers for them.
func (m *Manager) HasUsage() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k := range m.replicas {
		if k.topic == UsageTopicID {
			return true
		}
	}
	return false
}

// produceMeter returns the sink of partition k's closed produce ranges
// (partition.Config.Meter): nil without a meter, for the cell's internal
// partitions, and for a topic the view does not name. The tenant is read
// once: a topic id keeps its tenant.
func (m *Manager) produceMeter(v *cellview.View, k key) partition.MeterSink {
	if m.cfg.Usage == nil || k.topic == UsageTopicID || k.topic == groups.OffsetsTopicID {
		return nil
	}
	t, ok := v.TopicByID(k.topic)
	if !ok {
		return nil
	}
	return rangeSink{meter: m.cfg.Usage, tenant: t.TenantID, topic: k.topic, part: k.part}
}

// rangeSink records a partition's closed ranges as usage records: it
// queues the range in the meter and waits until a usage partition holds
// it (usage.Meter.Sync).
type rangeSink struct {
	meter         *usage.Meter
	tenant, topic string
	part          int32
}

func (s rangeSink) RecordRange(ctx context.Context, r partition.MeterRange) error {
	return s.meter.RecordRange(ctx, usage.Range{Tenant: s.tenant, Topic: s.topic, Partition: s.part, End: r.End, Hour: r.Hour, Bytes: r.Bytes, Messages: r.Records})
}
