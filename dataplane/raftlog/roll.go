package raftlog

import (
	"fmt"
	"slices"

	"github.com/hashicorp/raft"
)

// Replicated rolls. A compacted partition log does not roll by size or
// age on its own (dataplane/log, compacted.go): its leader replicates a
// ControlRoll entry, and every replica's store rolls its log when it
// stores that entry, after the batches before it. Every replica therefore
// starts its segments at the same offsets, which compaction needs to write
// the same segment files everywhere.
//
// The roll follows the entry's record, which is durable first (a control
// entry is never plain, see StoreLogs). A crash between the two leaves the
// record without the roll; Open rolls then (reconcileRoll). A Raft log
// conflict that removes entries may remove a roll entry, or cut back into
// the segment before one that stays: DeleteRange reconciles the log's last
// boundary with the entries left the same way.
//
// A compacted log's batches below the cleaned point are gone or rewritten
// (fewer records than offsets): GetLog answers raft.ErrLogNotFound for
// them, so a leader whose follower needs them sends a snapshot instead,
// and the follower is seeded from segments (seed.go), compacted as they
// are.

// storeRolling stores logs, rolling the partition log after each roll
// entry.
func (s *Store) storeRolling(logs []*raft.Log) error {
	for len(logs) > 0 {
		k := slices.IndexFunc(logs, func(l *raft.Log) bool { return isRoll(l.Type, l.Extensions, l.Data) })
		if k < 0 {
			return s.storeLogs(logs)
		}
		if err := s.storeLogs(logs[:k+1]); err != nil {
			return err
		}
		if err := s.log.Roll(); err != nil {
			return s.fail(fmt.Errorf("store raft entry %d: roll: %w", logs[k].Index, err))
		}
		logs = logs[k+1:]
	}
	return nil
}

// reconcileRoll makes the log's last segment boundary agree with the
// stored entries: a roll entry with nothing but non-data entries after it
// means the active segment starts at its offset. With unroll, an empty
// active segment that no such entry justifies is removed (its roll entry
// was cut by a conflict).
func (s *Store) reconcileRoll(unroll bool) error {
	s.mu.RLock()
	want := false
	for i := len(s.ents) - 1; i >= 0 && !s.ents[i].inLog(); i-- {
		if e := s.ents[i]; isRoll(e.typ, e.ext, e.data) {
			want = true
			break
		}
	}
	kafka := s.kafkaNext
	s.mu.RUnlock()
	active := s.log.ClosedEnd()
	switch {
	case want && active < kafka:
		if err := s.log.Roll(); err != nil {
			return s.fail(fmt.Errorf("reconcile roll at %d: %w", kafka, err))
		}
	case !want && unroll && active == kafka && s.log.Compacted():
		if err := s.log.Unroll(); err != nil {
			return s.fail(fmt.Errorf("reconcile roll at %d: %w", kafka, err))
		}
	}
	return nil
}

// unrollRemoved is DeleteRange's reconciliation after a suffix was cut.
func (s *Store) unrollRemoved() error { return s.reconcileRoll(true) }
