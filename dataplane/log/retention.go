package log

import (
	"fmt"
	"math"
	"sort"
)

// DeleteHead raises the log start offset to offset (at most NextOffset) and
// deletes the segments that lie wholly below it. The new start offset is
// checkpointed before any file is removed. Lower offsets are a no-op.
func (l *Log) DeleteHead(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.deleteHead(offset)
}

// deleteHead is DeleteHead with wmu held.
func (l *Log) deleteHead(offset int64) error {
	l.mu.RLock()
	err := l.usable()
	start, next := l.start, l.next
	l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("delete head to %d: %w", offset, err)
	}
	if offset > next {
		return fmt.Errorf("delete head to %d: %w: log ends at %d", offset, ErrOffsetOutOfRange, next)
	}
	if offset <= start {
		return nil
	}
	if err := l.fence(); err != nil { // journal.go: segments may be removed
		return fmt.Errorf("delete head to %d: %w", offset, err)
	}
	if err := l.writeCheckpoint(offset); err != nil {
		return fmt.Errorf("delete head to %d: %w", offset, err)
	}
	l.mu.Lock()
	l.start = offset
	// Segment i lies below the start if the next one begins at or before it.
	// The active segment always stays.
	k := 0
	for k < len(l.segs)-1 && l.segs[k+1].base <= offset {
		k++
	}
	dropped := append([]*segment(nil), l.segs[:k]...)
	l.segs = append(l.segs[:0:0], l.segs[k:]...)
	l.mu.Unlock()
	for _, s := range dropped {
		removeSegmentFiles(s)
	}
	if len(dropped) > 0 {
		l.cfg.Logger.Info("deleted log segments", "dir", l.cfg.Dir, "segments", len(dropped), "log_start_offset", offset)
	}
	return nil
}

// ApplyRetention deletes the oldest segments that retention.ms or
// retention.bytes allow, never the active one, and raises the log start
// offset to the first kept segment. It returns how many were deleted. A
// replicated log does not call it: its leader asks RetentionPoint and
// replicates the decision, which every replica applies with DeleteHead.
func (l *Log) ApplyRetention() (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	newStart, k, err := l.retentionPoint(math.MaxInt64)
	if err != nil {
		return 0, fmt.Errorf("apply retention: %w", err)
	}
	if k == 0 {
		return 0, nil
	}
	if err := l.deleteHead(newStart); err != nil {
		return 0, fmt.Errorf("apply retention: %w", err)
	}
	return k, nil
}

// RetentionPoint returns the log start offset that retention.ms and
// retention.bytes allow now: the base offset of the first segment to keep,
// considering only closed segments that lie wholly below limit (pass the
// high watermark, so nothing uncommitted or unread by the rule is ever
// chosen). It is the current log start offset when nothing may go. It
// deletes nothing.
func (l *Log) RetentionPoint(limit int64) (int64, error) {
	start, _, err := l.retentionPoint(limit)
	return start, err
}

// retentionPoint is RetentionPoint that also says how many segments lie
// below the returned offset.
func (l *Log) retentionPoint(limit int64) (int64, int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, 0, err
	}
	now := l.cfg.Now().UnixMilli()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	k := 0
	for ; k < len(l.segs)-1; k++ {
		s := l.segs[k]
		if s.next > limit {
			break
		}
		byAge := l.cfg.RetentionAge >= 0 && now-s.maxTS > l.cfg.RetentionAge.Milliseconds()
		bySize := l.cfg.RetentionBytes > 0 && total-s.size >= l.cfg.RetentionBytes
		if !byAge && !bySize {
			break
		}
		total -= s.size
	}
	if k == 0 || l.segs[k].base <= l.start {
		return l.start, 0, nil
	}
	return l.segs[k].base, k, nil
}

// OffsetForTimestamp returns the first offset at or after the log start
// whose batch max timestamp is ≥ ts; found is false if no batch is that new.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, false, fmt.Errorf("offset for timestamp %d: %w", ts, err)
	}
	for _, s := range l.segs {
		if s.maxTS < ts || s.next <= l.start {
			continue
		}
		// Every batch up to the last time entry below ts is older than ts.
		from := l.start
		j := sort.Search(len(s.times), func(j int) bool { return s.times[j].ts >= ts })
		if j > 0 {
			from = max(from, s.base+int64(s.times[j-1].rel))
		}
		var hb [HeaderSize]byte
		pos, h, err := s.findBatch(max(from, s.base), &hb)
		if err != nil {
			return 0, false, fmt.Errorf("offset for timestamp %d: %w", ts, err)
		}
		for {
			if h.MaxTimestamp >= ts {
				return max(h.BaseOffset, l.start), true, nil
			}
			pos += h.Size()
			if pos >= s.size {
				break
			}
			if h, err = s.readHeader(pos, &hb); err != nil {
				return 0, false, fmt.Errorf("offset for timestamp %d: %w", ts, err)
			}
		}
	}
	return 0, false, nil
}
