package replicas

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// Offsets partitions (consumer groups' committed offsets and membership)
// are Sluice's own and have fixed settings. Their records are never deleted
// by age or size: a group that commits rarely must find its offsets after
// any retention window, and deleting whole segments would drop the only
// copy of such an offset. They are compacted instead, as Kafka's
// __consumer_offsets is: every record is keyed (a group, or a group's
// partition), the cleaner keeps the newest record per key, and tombstones
// (deleted offsets and groups, expired offsets) go after
// delete.retention.ms, so a coordinator's load replays the live state plus
// the active segment (groups/load.go accepts compaction's gaps). The
// dirty ratio and the tombstone retention are Kafka's defaults.
var offsetsSettings = partition.Settings{
	MaxBatchBytes: log.DefaultMaxBatchBytes,
	Log: log.Settings{
		SegmentBytes: 16 << 20,
		SegmentAge:   time.Duration(topicspec.DefaultSegmentMs) * time.Millisecond,
		RetentionAge: -1, // keep forever: compaction, not retention
		Compacted:    true,
	},
	Compaction: partition.CompactionSettings{
		DeleteRetention: time.Duration(topicspec.DefaultDeleteRetentionMs) * time.Millisecond,
		MinDirtyRatio:   topicspec.DefaultMinCleanableDirtyRatio,
	},
}

// settingsFor maps a topic's effective configuration in the cell state onto
// its replicas' settings through topicspec's accessors, falling back to
// topicspec's defaults for a missing or invalid value. max.message.bytes is
// bounded by the tenant's max_message_bytes quota (the plan's maximum, when
// the state has one) and by partition.MaxBatchCeiling.
func settingsFor(v *cellview.View, t *wire.Topic) partition.Settings {
	tc := topicspec.Config(t.Config)
	var s partition.Settings
	maxBatch, ok := tc.MaxMessageBytes()
	if !ok {
		maxBatch = topicspec.DefaultMaxMessageBytes
	}
	if tn, ok := v.Tenant(t.TenantID); ok && tn.Quotas.MaxMessageBytes > 0 {
		maxBatch = min(maxBatch, tn.Quotas.MaxMessageBytes)
	}
	s.MaxBatchBytes = max(min(maxBatch, partition.MaxBatchCeiling), log.HeaderSize)
	if s.Log.SegmentBytes, ok = tc.SegmentBytes(); !ok {
		s.Log.SegmentBytes = topicspec.DefaultSegmentBytes
	}
	ms, ok := tc.SegmentMs()
	if !ok {
		ms = topicspec.DefaultSegmentMs
	}
	s.Log.SegmentAge = time.Duration(ms) * time.Millisecond
	if ms, ok = tc.RetentionMs(); !ok {
		ms = topicspec.DefaultRetentionMs
	}
	s.Log.RetentionAge = time.Duration(ms) * time.Millisecond
	if n, ok := tc.RetentionBytes(); ok && n > 0 {
		s.Log.RetentionBytes = n
	}
	if tc.Compacted() {
		s.Log.Compacted = true
		if !tc.Deletes() {
			// cleanup.policy=compact alone: retention deletes nothing.
			s.Log.RetentionAge, s.Log.RetentionBytes = -1, 0
		}
		s.Compaction = partition.CompactionSettings{
			DeleteRetention:  time.Duration(tc.DeleteRetentionMs()) * time.Millisecond,
			MinCompactionLag: time.Duration(tc.MinCompactionLagMs()) * time.Millisecond,
			MinDirtyRatio:    tc.MinCleanableDirtyRatio(),
		}
		if ms := tc.MaxCompactionLagMs(); ms < math.MaxInt64/int64(time.Millisecond) {
			s.Compaction.MaxCompactionLag = time.Duration(ms) * time.Millisecond
		}
	}
	return s
}

// planMaxBatch is the largest batch any topic of t's tenant may allow: the
// tenant's quota, or t's own limit when the state has no quota or the topic
// allows more.
func planMaxBatch(v *cellview.View, t *wire.Topic, s partition.Settings) int {
	n := s.MaxBatchBytes
	if tn, ok := v.Tenant(t.TenantID); ok {
		n = max(n, tn.Quotas.MaxMessageBytes)
	}
	return min(n, partition.MaxBatchCeiling)
}

// appendEntriesFrame is how many bytes of batches one AppendEntries may
// carry: below the transport's 80 MiB frame limit with room for headers.
const appendEntriesFrame = 64 << 20

// maxAppendEntries bounds how many entries Raft sends in one AppendEntries
// so that entries of up to maxBatch bytes fit one transport frame, without
// going above Raft's own default (64).
func maxAppendEntries(maxBatch, dflt int) int {
	return max(1, min(dflt, appendEntriesFrame/max(maxBatch, 1)))
}
