package log

import "fmt"

// Read-only accessors for consumer lag: how many log bytes lie between two
// offsets, and how old the batch at an offset is.

// BytesBetween returns the size of the batches from the one holding from up
// to, not including, the one holding to; to == NextOffset counts to the end
// of the log. Whole batches count (a reader resumes at a batch boundary), so
// a from inside a batch counts that whole batch. Both offsets must lie in
// [LogStartOffset, NextOffset] and from ≤ to; otherwise the error wraps
// ErrOffsetOutOfRange. Segments are read under one lock, so a concurrent
// retention run cannot skew the sum.
func (l *Log) BytesBetween(from, to int64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("bytes between %d and %d: %w", from, to, err)
	}
	if from > to || from < l.start || to > l.next {
		return 0, fmt.Errorf("bytes between %d and %d: %w: log holds [%d, %d)", from, to, ErrOffsetOutOfRange, l.start, l.next)
	}
	i, pi, err := l.position(from)
	if err != nil {
		return 0, fmt.Errorf("bytes between %d and %d: %w", from, to, err)
	}
	j, pj, err := l.position(to)
	if err != nil {
		return 0, fmt.Errorf("bytes between %d and %d: %w", from, to, err)
	}
	if i == j {
		return pj - pi, nil
	}
	n := l.segs[i].size - pi + pj
	for k := i + 1; k < j; k++ {
		n += l.segs[k].size
	}
	return n, nil
}

// BatchMaxTimestamp returns the max timestamp (milliseconds since the epoch)
// of the batch holding offset, which must lie in [LogStartOffset,
// NextOffset); otherwise the error wraps ErrOffsetOutOfRange.
func (l *Log) BatchMaxTimestamp(offset int64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("batch timestamp at %d: %w", offset, err)
	}
	if offset < l.start || offset >= l.next {
		return 0, fmt.Errorf("batch timestamp at %d: %w: log holds [%d, %d)", offset, ErrOffsetOutOfRange, l.start, l.next)
	}
	var hb [HeaderSize]byte
	i, at := l.locate(offset)
	if at >= l.next {
		return 0, fmt.Errorf("batch timestamp at %d: %w: compaction removed every batch from it to the end", offset, ErrOffsetOutOfRange)
	}
	_, h, err := l.segs[i].findBatch(at, &hb)
	if err != nil {
		return 0, fmt.Errorf("batch timestamp at %d: %w", offset, err)
	}
	return h.MaxTimestamp, nil
}

// position returns the segment index and byte position of the batch holding
// offset, or the end of the last segment for NextOffset. Called with mu held
// and offset in [start, next].
func (l *Log) position(offset int64) (int, int64, error) {
	i, at := l.locate(offset)
	if at >= l.next {
		last := len(l.segs) - 1
		return last, l.segs[last].size, nil
	}
	var hb [HeaderSize]byte
	pos, _, err := l.segs[i].findBatch(at, &hb)
	return i, pos, err
}
