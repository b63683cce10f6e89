package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/dataplane/journal"
)

// Log is one partition's log. Appends, truncation, rolls and retention are
// serialized by the log; reads and syncs may run concurrently with them and
// with each other.
type Log struct {
	cfg    Config
	dir    *os.File // held open for directory fsync, syncfs and the flock
	report RecoveryReport
	// gaps says recovery and truncation accept compaction's offset gaps:
	// the log is compacted, or was (compacted.go). Set at Open and by
	// Reconfigure, under wmu and mu.
	gaps bool

	// wmu serializes the writers: Append, TruncateTo, DeleteHead, Roll,
	// ApplyRetention, Close. Lock order: wmu, then mu.
	wmu sync.Mutex

	// cleanMu lets one Clean run at a time; it is taken before wmu.
	cleanMu sync.Mutex

	// mu guards the fields below. Readers hold it shared while they locate
	// batches; writers hold it exclusively only to publish a change.
	mu      sync.RWMutex
	segs    []*segment // ascending base offsets; the last is active
	next    int64      // offset the next batch gets
	start   int64      // log start offset
	durable int64      // every batch below this offset is on stable storage
	gen     uint64     // bumped by truncation so stale syncs do not count
	dirGen  uint64     // bumped when a segment file is created
	dirSync uint64     // dirGen covered by the last directory fsync
	failed  error      // set by a failed fsync or write; the log refuses work
	closed  bool
	// cleanedTo is the End of the last Clean, valid while gen is still
	// cleanedGen (a truncation or a replace bumps gen): below it every key
	// has one record, so the next Clean maps keys from there (clean.go).
	cleanedTo  int64
	cleanedGen uint64
	// lastClean is the cleaner's checkpoint as last written or loaded
	// (clean_checkpoint.go), nil if there is none to trust.
	lastClean *cleanCheckpoint

	// jpath is Dir relative to the journal's root; jgen is bumped by each
	// fence, so that bytes read for the journal before it are dropped
	// (journal.go). Unused without Config.Journal.
	jpath string
	jgen  atomic.Uint64
}

// Batch is one record batch to append with the leader epoch to stamp on it.
type Batch struct {
	Data        []byte
	LeaderEpoch int32
	// Checked says the caller validated Data whole (ValidateBatch or
	// ValidateClientBatch) and has not changed it since but for the base
	// offset and leader epoch, which the CRC does not cover: the append
	// then checks its framing but does not hash it again.
	Checked bool
	// Keep appends the batch at its own base offset, which must not be
	// below the log end, with its own leader epoch, as a mirror of
	// another cell's partition copies it (LeaderEpoch is ignored). A base
	// past the log end leaves a gap, as compaction does: the log is then
	// marked as holding gaps (compacted.go) before the batch is written.
	Keep bool
}

// NextOffset is the offset the next appended batch will get (the log end offset).
func (l *Log) NextOffset() int64 { l.mu.RLock(); defer l.mu.RUnlock(); return l.next }

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { l.mu.RLock(); defer l.mu.RUnlock(); return l.start }

// DurableOffset is the offset below which every batch has been fsynced.
func (l *Log) DurableOffset() int64 { l.mu.RLock(); defer l.mu.RUnlock(); return l.durable }

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the base offsets of the segments, oldest first.
func (l *Log) Segments() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]int64, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.base
	}
	return out
}

// Recovery reports what Open found and repaired.
func (l *Log) Recovery() RecoveryReport { return l.report }

func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}
	return nil
}

// Append validates one batch, assigns its offsets and stamps epoch, writes
// it, and returns its base and last offsets. It modifies the batch in place
// (bytes 0–7 and 12–15). The batch is durable once a Sync covering it returns.
func (l *Log) Append(batch []byte, epoch int32) (base, last int64, err error) {
	one := [1]Batch{{Data: batch, LeaderEpoch: epoch}}
	return l.AppendBatches(one[:])
}

// AppendBatches appends several batches in order with as few writes as
// possible, and returns the base offset of the first and the last offset of
// the last. Each batch is stamped in place, so its bytes 0–7 carry its base
// offset afterwards. If any batch is invalid nothing is appended. If a
// write or roll fails part way, the batches before the failure stay
// appended; NextOffset says how far.
func (l *Log) AppendBatches(batches []Batch) (first, last int64, err error) {
	if len(batches) == 0 {
		return 0, 0, fmt.Errorf("append: no batches")
	}
	for i, b := range batches {
		if len(b.Data) > l.cfg.MaxBatchBytes {
			return 0, 0, fmt.Errorf("append batch %d: %w: %d bytes, limit %d", i, ErrBatchTooLarge, len(b.Data), l.cfg.MaxBatchBytes)
		}
		check := ValidateBatch
		if b.Checked {
			check = checkFraming
		}
		if _, err := check(b.Data); err != nil {
			return 0, 0, fmt.Errorf("append batch %d: %w", i, err)
		}
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	err = l.usable()
	next := l.next
	l.mu.RUnlock()
	if err != nil {
		return 0, 0, fmt.Errorf("append: %w", err)
	}
	first = next
	var iov [][]byte
	var iovArr [8][]byte
	iov = iovArr[:0]
	pending := 0 // batches[pending:i] are stamped but not yet written
	for i, b := range batches {
		delta := int64(int32FromBE(b.Data[offLastDelta:]))
		if b.Keep {
			if err := l.keepAt(b.Data, next); err != nil {
				return 0, 0, err
			}
			next = int64(binary.BigEndian.Uint64(b.Data[offBaseOffset:]))
			if i == 0 {
				first = next
			}
		}
		if l.needsRoll(int64(len(b.Data)), next+delta, iov) {
			if err := l.writeAndPublish(batches[pending:i], iov); err != nil {
				return 0, 0, err
			}
			iov, pending = iov[:0], i
			if err := l.roll(); err != nil {
				return 0, 0, err
			}
		}
		if !b.Keep {
			stamp(b.Data, next, b.LeaderEpoch)
		}
		iov = append(iov, b.Data)
		next += delta + 1
	}
	if err := l.writeAndPublish(batches[pending:], iov); err != nil {
		return 0, 0, err
	}
	return first, next - 1, nil
}

// keepAt checks that a kept batch does not start below next, and marks
// the log as holding gaps before one that starts past it. Called with wmu
// held.
func (l *Log) keepAt(b []byte, next int64) error {
	base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	if base < next {
		return fmt.Errorf("append kept batch at %d: %w: the log ends at %d", base, ErrOffsetOutOfRange, next)
	}
	l.mu.RLock()
	gaps := l.gaps
	l.mu.RUnlock()
	if base == next || gaps {
		return nil
	}
	if err := markCompacted(l.cfg.Dir, l.dir); err != nil {
		return fmt.Errorf("append kept batch at %d: %w", base, err)
	}
	l.mu.Lock()
	l.gaps = true
	l.mu.Unlock()
	return nil
}

func int32FromBE(b []byte) int32 {
	return int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}

// needsRoll reports whether the active segment must be rolled before a batch
// of size bytes whose last offset is last. Called with wmu held.
func (l *Log) needsRoll(size, last int64, pending [][]byte) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.segs[len(l.segs)-1]
	used := s.size
	for _, p := range pending {
		used += int64(len(p))
	}
	if used == 0 {
		return false
	}
	if l.cfg.Compacted {
		// Rolls are replicated (compacted.go); only the hard limits,
		// which depend on the segment's content alone, apply here.
		return used+size > maxSegmentBytes || last-s.base > maxRelOffset
	}
	return used+size > l.cfg.SegmentBytes ||
		last-s.base > maxRelOffset ||
		l.cfg.Now().Sub(s.created) >= l.cfg.SegmentAge
}

// writeAndPublish writes stamped batches at the end of the active segment and
// then makes them visible to readers. Called with wmu held.
func (l *Log) writeAndPublish(batches []Batch, iov [][]byte) error {
	if len(iov) == 0 {
		return nil
	}
	l.mu.RLock()
	s := l.segs[len(l.segs)-1]
	pos := s.size
	l.mu.RUnlock()
	off := pos
	for _, b := range iov {
		off += int64(len(b))
	}
	if err := journal.PwritevAll(s.fd, iov, pos); err != nil {
		// Drop whatever part got written; the next append overwrites it.
		_ = s.f.Truncate(pos)
		return fmt.Errorf("append to segment %d: %w", s.base, err)
	}
	l.mu.Lock()
	p := pos
	for _, b := range batches {
		h, _ := ParseHeader(b.Data)
		s.indexBatch(h, p, l.cfg.IndexIntervalBytes)
		p += h.Size()
	}
	s.size = off
	l.next = s.next
	l.mu.Unlock()
	return nil
}

// Roll closes the active segment to appends and starts a new one, unless the
// active segment is empty.
func (l *Log) Roll() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	err := l.usable()
	empty := l.segs[len(l.segs)-1].size == 0
	l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	if empty {
		return nil
	}
	return l.roll()
}

// roll makes the active segment durable with its index files, then creates
// the next segment. Every segment but the last is therefore fully on stable
// storage, and recovery only has to scan the last one. Called with wmu held.
func (l *Log) roll() error {
	l.mu.RLock()
	old := l.segs[len(l.segs)-1]
	next := l.next
	l.mu.RUnlock()
	if err := unix.Fdatasync(old.fd); err != nil {
		l.fail(err)
		return fmt.Errorf("roll segment %d: sync: %w", old.base, err)
	}
	l.mu.Lock()
	old.synced = old.size
	old.finishTimeIndex()
	l.mu.Unlock()
	if err := old.writeIndexes(); err != nil {
		return fmt.Errorf("roll segment %d: %w", old.base, err)
	}
	s, err := openSegment(l.cfg.Dir, next, true, l.cfg.Now())
	if err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.dirGen++
	l.mu.Unlock()
	return nil
}

func (l *Log) fail(err error) {
	l.mu.Lock()
	if l.failed == nil {
		l.failed = err
	}
	l.mu.Unlock()
}

// segmentFor returns the index of the segment holding offset. Called with mu held.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// locate returns the index of the segment that holds the first batch at or
// after offset, and the offset to look up there: in a compacted log a
// segment may end below the next one's base, or hold no batch at all.
// Called with mu held and offset below next.
func (l *Log) locate(offset int64) (int, int64) {
	i := l.segmentFor(offset)
	for i < len(l.segs)-1 && offset >= l.segs[i].next {
		i++
	}
	return i, max(offset, l.segs[i].base)
}

// findBatch returns the position and header of the batch in s holding
// offset, or the first batch after it if a compaction removed offset's
// batch; offset must be below s.next. Called with mu held.
func (s *segment) findBatch(offset int64, hb *[HeaderSize]byte) (int64, Header, error) {
	pos, _ := s.lookup(offset)
	for pos < s.size {
		h, err := s.readHeader(pos, hb)
		if err != nil {
			return 0, h, err
		}
		if offset <= h.LastOffset() {
			return pos, h, nil
		}
		pos += h.Size()
	}
	return 0, Header{}, fmt.Errorf("find offset %d in segment %d: %w", offset, s.base, ErrOffsetOutOfRange)
}

// Read returns the batches starting with the one that contains offset, as a
// range of one segment file: whole batches only, at least one, then more
// while the total stays within maxBytes and their base offsets stay below
// maxOffset (exclusive; pass the high watermark, or math.MaxInt64).
//
// offset == NextOffset, or offset ≥ maxOffset, gives an empty Slice. Offsets
// below LogStartOffset or above NextOffset give ErrOffsetOutOfRange. The
// caller must Release the Slice; until then its file stays open even if
// retention deletes the segment. Bytes at or above the high watermark may
// change under a Slice if the tail is truncated; below it they never do.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Slice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Slice{}, fmt.Errorf("read offset %d: %w", offset, ErrClosed)
	}
	if offset < l.start || offset > l.next {
		return Slice{}, fmt.Errorf("read offset %d: %w: log holds [%d, %d)", offset, ErrOffsetOutOfRange, l.start, l.next)
	}
	if offset == l.next || offset >= maxOffset {
		return Slice{BaseOffset: offset, NextOffset: offset}, nil
	}
	i, at := l.locate(offset)
	if at >= l.next {
		// offset fell in a compacted gap that reaches the end of the log.
		return Slice{BaseOffset: offset, NextOffset: offset}, nil
	}
	s := l.segs[i]
	var hb [HeaderSize]byte
	pos, h, err := s.findBatch(at, &hb)
	if err != nil {
		return Slice{}, fmt.Errorf("read offset %d: %w", offset, err)
	}
	if h.BaseOffset >= maxOffset {
		// offset fell in a compacted gap that reaches maxOffset.
		return Slice{BaseOffset: offset, NextOffset: offset}, nil
	}
	start := pos
	base := h.BaseOffset
	end := pos + h.Size()
	next := h.NextOffset()
	limit := start + int64(max(maxBytes, 0))
	// Jump over whole index intervals that fit: every batch before an index
	// entry at or below the byte limit ends within it.
	rel := func(off int64) int64 { return off - s.base }
	j := sort.Search(len(s.offs), func(j int) bool {
		e := s.offs[j]
		return int64(e.pos) > limit || rel(maxOffset) < int64(e.rel)
	})
	if j > 0 && int64(s.offs[j-1].pos) > end {
		e := s.offs[j-1]
		end, next = int64(e.pos), s.base+int64(e.rel)
	}
	for end < s.size && next < maxOffset {
		h, err := s.readHeader(end, &hb)
		if err != nil {
			return Slice{}, fmt.Errorf("read offset %d: %w", offset, err)
		}
		if end+h.Size() > limit {
			break
		}
		end += h.Size()
		next = h.NextOffset()
	}
	s.ref()
	return Slice{seg: s, Pos: start, Size: end - start, BaseOffset: base, NextOffset: next}, nil
}

// ReadBatch appends the batch that contains offset to buf and returns its
// header and the extended buffer. It serves Raft's GetLog.
func (l *Log) ReadBatch(offset int64, buf []byte) (Header, []byte, error) {
	sl, err := l.Read(offset, 0, math.MaxInt64)
	if err != nil {
		return Header{}, buf, err
	}
	defer sl.Release()
	if sl.Size == 0 {
		return Header{}, buf, fmt.Errorf("read batch %d: %w: log ends at %d", offset, ErrOffsetOutOfRange, offset)
	}
	n := len(buf)
	buf, err = sl.AppendTo(buf)
	if err != nil {
		return Header{}, buf[:n], fmt.Errorf("read batch %d: %w", offset, err)
	}
	h, err := ParseHeader(buf[n:])
	if err != nil {
		return h, buf[:n], fmt.Errorf("read batch %d: %w", offset, err)
	}
	return h, buf, nil
}

// TruncateTo removes every batch at or after offset, which must be the base
// offset of a batch or NextOffset, and not below LogStartOffset. The cut is
// on stable storage when TruncateTo returns. It serves Raft log conflicts.
func (l *Log) TruncateTo(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.NextOffset() > offset {
		if err := l.fence(); err != nil { // journal.go
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	if offset < l.start || offset > l.next {
		err := fmt.Errorf("truncate to %d: %w: log holds [%d, %d)", offset, ErrOffsetOutOfRange, l.start, l.next)
		l.mu.Unlock()
		return err
	}
	if offset == l.next {
		l.mu.Unlock()
		return nil
	}
	if ck := l.lastClean; ck != nil && offset <= ck.End || l.cleanedGen == l.gen && offset <= l.cleanedTo {
		// The cut reaches what the cleaner's checkpoint lists: forget it
		// durably first, so no restart trusts it (clean_checkpoint.go).
		l.mu.Unlock()
		if err := l.dropCleanCheckpoint(); err != nil {
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
		l.mu.Lock()
		if err := l.usable(); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
	}
	i := l.segmentFor(offset)
	s := l.segs[i]
	var cut int64
	if offset == s.base && i > 0 {
		i-- // drop s and everything after; the previous segment ends at offset
		s = l.segs[i]
		cut = s.size
	} else {
		var hb [HeaderSize]byte
		pos, h, err := s.findBatch(offset, &hb)
		if err != nil {
			l.mu.Unlock()
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
		if h.BaseOffset != offset {
			l.mu.Unlock()
			return fmt.Errorf("truncate to %d: %w: batch %d–%d", offset, ErrNotBatchBoundary, h.BaseOffset, h.LastOffset())
		}
		cut = pos
	}
	dropped := append([]*segment(nil), l.segs[i+1:]...)
	l.segs = l.segs[:i+1]
	l.gen++
	var err error
	if cut < s.size {
		err = s.f.Truncate(cut)
		if err == nil {
			from, base := s.trimIndex(cut)
			_, err = s.scan(from, cut, base, false, l.gaps, l.cfg.IndexIntervalBytes)
		}
		s.size = cut
		s.synced = min(s.synced, cut)
		s.journaled = min(s.journaled, cut)
	}
	l.next = s.next
	l.durable = min(l.durable, l.next)
	l.mu.Unlock()
	if err != nil {
		l.fail(err)
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	for _, d := range dropped {
		removeSegmentFiles(d)
	}
	if err := unix.Fdatasync(s.fd); err != nil {
		l.fail(err)
		return fmt.Errorf("truncate to %d: sync: %w", offset, err)
	}
	if len(dropped) > 0 {
		if err := l.dir.Sync(); err != nil {
			l.fail(err)
			return fmt.Errorf("truncate to %d: sync directory: %w", offset, err)
		}
	}
	l.mu.Lock()
	if s.synced < s.size && s.size == cut {
		s.synced = cut
	}
	l.mu.Unlock()
	return nil
}

// removeSegmentFiles unlinks a segment's files and drops the log's
// reference; open Slices keep the file readable until they are released.
func removeSegmentFiles(s *segment) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(segmentPath(s.dir, s.base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = err // the next Open removes leftovers below the log start
		}
	}
	s.unref()
}

// Close releases the log. It does not sync, unless the log has a journal:
// call Sync first for durability. With a journal it syncs and fences
// (journal.go), so that no record of it outlives it, whatever becomes of
// its directory. Slices still held stay readable until released. Close is
// idempotent.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	var ferr error
	if j := l.cfg.Journal; j != nil {
		// A failed log cannot be synced; its records then stay for the
		// next start to replay.
		if ferr = l.fence(); ferr == nil {
			j.Forget(l)
		}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.unref()
	}
	if ferr != nil && !errors.Is(ferr, ErrLogFailed) {
		l.dir.Close()
		return fmt.Errorf("close log %s: %w", l.cfg.Dir, ferr)
	}
	return l.dir.Close() // also drops the flock
}
