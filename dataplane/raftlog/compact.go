package raftlog

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/dataplane/log"
)

// compactMin is the fewest entries CompactEntries drops by itself unless
// they are at least half the file: rewriting the entries file for a few
// records would cost more than the records.
const compactMin = 4096

// KafkaOffsetThrough is the Kafka log end offset right after Raft entry
// index: the offset below which every batch of entries up to index lies.
// For an index the entries file no longer holds (compacted), it is the
// Kafka offset where the file's first entry starts, a lower bound. ok is
// false for an index past the last entry.
func (s *Store) KafkaOffsetThrough(index uint64) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case len(s.ents) == 0 || index >= s.first+uint64(len(s.ents)):
		return 0, false
	case index < s.first:
		return s.ents[0].at, true
	}
	e := s.ents[index-s.first]
	return e.at + e.count, true
}

// Compactable reports whether the entries file holds a record whose batch
// lies wholly below the log start, which CompactEntries could drop. It is
// cheap: it looks at the first entry only.
func (s *Store) Compactable() bool {
	start := s.log.LogStartOffset()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.ents) > 1 && s.ents[0].at+s.ents[0].count <= start && start > 0
}

// CompactEntries checkpoints the entries file: it drops the records of the
// leading entries up to Raft index upTo whose batches lie wholly below the
// partition log's start offset (retention deleted them), so that the file
// does not grow without bound. The caller passes the index of Raft's latest
// snapshot: Raft replays entries after it at a restart, so they must stay.
// The last entry always stays. It rewrites the file (new file, fsync,
// rename, directory fsync) only when it drops at least compactMin records
// or half of them, and returns how many it dropped. Raft's GetLog then
// answers raft.ErrLogNotFound for the dropped indexes, and FirstIndex
// moves up.
func (s *Store) CompactEntries(upTo uint64) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	start := s.log.LogStartOffset()
	s.mu.RLock()
	err := s.usable()
	n := 0
	for n < len(s.ents)-1 && s.first+uint64(n) <= upTo && s.ents[n].at+s.ents[n].count <= start {
		n++
	}
	total := len(s.ents)
	var from, size int64
	if n > 0 {
		from, size = s.ents[n].pos, s.size
	}
	s.mu.RUnlock()
	if err != nil {
		return 0, fmt.Errorf("compact raft entries: %w", err)
	}
	if n == 0 || (n < compactMin && 2*n < total) {
		return 0, nil
	}
	path := filepath.Join(s.cfg.Dir, entriesName)
	tmp := path + ".compact"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("compact raft entries: %w", err)
	}
	fail := func(err error) (int, error) {
		f.Close()
		os.Remove(tmp)
		return 0, fmt.Errorf("compact raft entries: %w", err)
	}
	if _, err := io.Copy(f, io.NewSectionReader(s.idx, from, size-from)); err != nil {
		return fail(err)
	}
	if err := fdatasync(f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	// From here the new file is the entries file; a failure to make the
	// rename durable leaves either file valid (both hold the kept
	// records, recovery accepts a file starting at any index).
	if err := log.SyncDir(s.cfg.Dir); err != nil {
		f.Close()
		return 0, s.fail(fmt.Errorf("compact raft entries: %w", err))
	}
	s.mu.Lock()
	old := s.idx
	s.idx = f
	kept := make([]entry, total-n)
	copy(kept, s.ents[n:])
	for i := range kept {
		kept[i].pos -= from
	}
	s.ents = kept
	s.first += uint64(n)
	s.size -= from
	s.synced = s.size
	s.mu.Unlock()
	old.Close()
	s.cfg.Logger.Info("raft entries file checkpointed below the log start", "dropped", n, "first_index", s.first, "log_start_offset", start)
	return n, nil
}
