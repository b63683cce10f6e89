package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A compacted log (Config.Compacted, cleanup.policy=compact) differs from
// a deleting one in three ways, all here and in needsRoll:
//
//   - It may hold the offset gaps Clean leaves, and recovery accepts them.
//     Once a log has been compacted it keeps a marker file (compactedName),
//     so that it is recovered as compacted even if its topic stops being
//     compacted: cutting it at its first gap would lose records.
//   - It never rolls by size or age on its own. Its rolls are the
//     replication layer's to decide (RollDue, then Roll at the same place
//     in every replica's log), so that every replica has the same segment
//     boundaries and Clean, which works segment by segment, writes the same
//     files everywhere. Only the hard limits (1 GiB, and offsets that must
//     fit a segment's relative index) still roll it, which depend on the
//     segment's content alone and are therefore the same on every replica.
//   - Clean runs on it.

// compactedName marks a log directory as possibly holding compaction gaps.
const compactedName = "compacted"

// markCompacted writes the marker durably if it is missing.
func markCompacted(dir string, d *os.File) error {
	p := filepath.Join(dir, compactedName)
	if _, err := os.Stat(p); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mark log compacted: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("mark log compacted: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mark log compacted: %w", err)
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("mark log compacted: sync directory: %w", err)
	}
	return nil
}

// hasCompactedMark reports whether dir holds the marker.
func hasCompactedMark(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, compactedName))
	return err == nil
}

// Compacted reports whether the log is compacted now (Config.Compacted or
// Settings.Compacted): its rolls are the replication layer's, and Clean
// runs.
func (l *Log) Compacted() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg.Compacted
}

// HasGaps reports whether the log may hold compaction's gaps and
// rewritten batches: it is compacted, or was.
func (l *Log) HasGaps() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.gaps
}

// RollDue reports whether a compacted log's active segment has reached
// segment.bytes or segment.ms and should be rolled: the replication
// layer's leader asks, and replicates the roll so that every replica rolls
// at the same offset. An empty active segment is never due.
func (l *Log) RollDue() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return false
	}
	s := l.segs[len(l.segs)-1]
	if s.size == 0 {
		return false
	}
	return s.size >= l.cfg.SegmentBytes || l.cfg.Now().Sub(s.created) >= l.cfg.SegmentAge
}

// DirtyBytes is how many bytes of closed segments lie at or above offset
// from (the end of what was last compacted), and CleanBytes how many lie
// below it: the cleaner's dirty ratio is dirty / (clean + dirty).
func (l *Log) DirtyBytes(from int64) (clean, dirty int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i := 0; i+1 < len(l.segs); i++ {
		s := l.segs[i]
		if l.segs[i+1].base <= from {
			clean += s.size
		} else {
			dirty += s.size
		}
	}
	return clean, dirty
}

// ClosedEnd is the base offset of the active segment: every offset below
// it lies in a closed segment, which Clean may rewrite.
func (l *Log) ClosedEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.segs[len(l.segs)-1].base
}

// Unroll removes an empty active segment, so that the segment before it
// takes appends again: the replication layer undoes a roll whose entry a
// Raft log conflict removed. It does nothing if the active segment holds
// data or is the only one.
func (l *Log) Unroll() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("unroll: %w", err)
	}
	n := len(l.segs)
	if n < 2 || l.segs[n-1].size != 0 {
		l.mu.Unlock()
		return nil
	}
	d := l.segs[n-1]
	listed := l.lastClean != nil && d.base <= l.lastClean.End
	l.segs = l.segs[:n-1]
	l.gen++
	l.mu.Unlock()
	if listed {
		// The segment before d, which the cleaner's checkpoint may list,
		// takes appends again.
		if err := l.dropCleanCheckpoint(); err != nil {
			return fmt.Errorf("unroll: %w", err)
		}
	}
	removeSegmentFiles(d)
	if err := l.dir.Sync(); err != nil {
		l.fail(err)
		return fmt.Errorf("unroll: sync directory: %w", err)
	}
	return nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.cfg.Dir }
