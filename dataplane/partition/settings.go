package partition

import (
	"fmt"

	"github.com/sluicehq/sluice/dataplane/log"
)

// MaxBatchCeiling is the largest record batch a replicated partition
// stores, whatever its topic says: the store's own limit. The transport
// carries Raft entries in frames of at most 80 MiB, so a batch must fit one
// with room for its headers.
//
// The store does not apply the topic's max.message.bytes: a follower must
// store every entry its leader committed, also one written under a larger
// limit than the follower's view of the topic has now (the setting changed
// in between, or reached the leader first). Produce enforces the topic's
// limit, on the leader, before a batch reaches Raft.
const MaxBatchCeiling = 64 << 20

// Settings are a replica's per-topic settings that may change while it
// runs: the largest batch Produce accepts (max.message.bytes) and its log's
// segment and retention settings.
type Settings struct {
	// MaxBatchBytes is the largest client batch Produce accepts; zero
	// means log.DefaultMaxBatchBytes, at most MaxBatchCeiling.
	MaxBatchBytes int
	// Log holds segment.bytes, segment.ms, retention.ms and
	// retention.bytes for the replica's partition log. Retention is the
	// leader's to decide (see retention.go); a follower keeps the values
	// for when it leads.
	Log log.Settings
	// Compaction is the cleaner's settings when Log.Compacted (compact.go).
	Compaction CompactionSettings
}

func (s *Settings) validate() error {
	if s.MaxBatchBytes == 0 {
		s.MaxBatchBytes = log.DefaultMaxBatchBytes
	}
	if s.MaxBatchBytes < log.HeaderSize || s.MaxBatchBytes > MaxBatchCeiling {
		return fmt.Errorf("settings: MaxBatchBytes is %d; it must be from %d to %d", s.MaxBatchBytes, log.HeaderSize, MaxBatchCeiling)
	}
	if c := s.Compaction; c.DeleteRetention < 0 || c.MinCompactionLag < 0 || c.MaxCompactionLag < 0 || !(c.MinDirtyRatio >= 0 && c.MinDirtyRatio <= 1) {
		return fmt.Errorf("settings: compaction settings %+v: durations must not be negative and the dirty ratio must be from 0 to 1", c)
	}
	return nil
}

// Settings returns the settings in force.
func (r *Replica) Settings() Settings {
	r.compact.mu.Lock()
	c := r.compact.settings
	r.compact.mu.Unlock()
	return Settings{MaxBatchBytes: int(r.maxBatch.Load()), Log: r.store.Log().Settings(), Compaction: c}
}

// SetSettings applies new settings to the running replica: the next
// Produce checks the new batch limit, the next roll and retention pass use
// the new log settings. Invalid settings change nothing.
func (r *Replica) SetSettings(s Settings) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("set replica settings: %w", err)
	}
	if err := r.store.Log().Reconfigure(s.Log); err != nil {
		return fmt.Errorf("set replica settings: %w", err)
	}
	r.maxBatch.Store(int64(s.MaxBatchBytes))
	r.compact.mu.Lock()
	r.compact.settings = s.Compaction
	r.compact.mu.Unlock()
	return nil
}

// checkBatchSize refuses a client batch above max.message.bytes before it
// reaches Raft.
func (r *Replica) checkBatchSize(batch []byte) error {
	if limit := r.maxBatch.Load(); int64(len(batch)) > limit {
		return fmt.Errorf("produce: %w: %d bytes, the topic's max.message.bytes is %d", log.ErrBatchTooLarge, len(batch), limit)
	}
	return nil
}
