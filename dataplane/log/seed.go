package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Seeding copies a log's segment files, byte for byte, into another
// replica's directory (see DESIGN.md, "Seeding a replica from segments").
// The source side lists and reads segment files (SeedSegments,
// ReadSegment); the receiving side checks what it already copied
// (VerifySegmentFile) and swaps the copy in (Replace).

// SeedSegment is one segment file a seeding replica copies.
type SeedSegment struct {
	// Base is the segment's base offset (its file name).
	Base int64
	// Size is how many bytes of the file to copy: the whole file, or, for
	// the segment holding the seed's end offset, the bytes before the
	// batch that starts there.
	Size int64
}

// SeedSegments lists the segment files holding offsets [from, to): from
// the one containing from (or the first, if the log's files start above
// it) to the one ending at or after to, with the bytes to copy of each.
// start is the offset the copy begins at (max(from, the log start)); to
// must be a batch boundary no later than NextOffset.
func (l *Log) SeedSegments(from, to int64) (start int64, segs []SeedSegment, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, nil, fmt.Errorf("list seed segments: %w", err)
	}
	start = max(from, l.start)
	if to < start || to > l.next {
		return 0, nil, fmt.Errorf("list seed segments [%d, %d): %w: log holds [%d, %d)", from, to, ErrOffsetOutOfRange, l.start, l.next)
	}
	if to == start {
		return start, nil, nil
	}
	var hb [HeaderSize]byte
	for i := l.segmentFor(start); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.base == to && l.gaps {
			// A compacted log's boundaries are replicated (compacted.go):
			// the receiver must start its next segment where this one
			// does, so the segment at the seed's end is listed, empty.
			segs = append(segs, SeedSegment{Base: s.base})
		}
		if s.base >= to {
			break
		}
		size := s.size
		if s.next > to {
			pos, h, err := s.findBatch(to, &hb)
			if err != nil {
				return 0, nil, fmt.Errorf("list seed segments: %w", err)
			}
			if h.BaseOffset != to {
				return 0, nil, fmt.Errorf("list seed segments: %w: offset %d is inside the batch at %d", ErrOffsetOutOfRange, to, h.BaseOffset)
			}
			size = pos
		}
		segs = append(segs, SeedSegment{Base: s.base, Size: size})
	}
	return start, segs, nil
}

// ReadSegment reads up to len(p) bytes of segment base's file from byte
// pos, never past limit nor past what the log has published. A segment the
// log no longer holds (retention deleted it) is ErrOffsetOutOfRange.
func (l *Log) ReadSegment(base, pos, limit int64, p []byte) (int, error) {
	l.mu.RLock()
	if err := l.usable(); err != nil {
		l.mu.RUnlock()
		return 0, fmt.Errorf("read segment %d: %w", base, err)
	}
	var seg *segment
	for _, s := range l.segs {
		if s.base == base {
			seg = s
			break
		}
	}
	if seg == nil {
		l.mu.RUnlock()
		return 0, fmt.Errorf("read segment %d: %w: not in the log", base, ErrOffsetOutOfRange)
	}
	limit = min(limit, seg.size)
	seg.ref()
	l.mu.RUnlock()
	defer seg.unref()
	if pos < 0 || pos > limit {
		return 0, fmt.Errorf("read segment %d at %d: %w: %d bytes to copy", base, pos, ErrOffsetOutOfRange, limit)
	}
	p = p[:min(int64(len(p)), limit-pos)]
	n := 0
	for n < len(p) {
		m, err := unix.Pread(seg.fd, p[n:], pos+int64(n))
		if err != nil {
			return n, fmt.Errorf("read segment %d at %d: %w", base, pos+int64(n), err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// SegmentFileName is the name of segment base's log file.
func SegmentFileName(base int64) string { return fmt.Sprintf("%020d%s", base, logSuffix) }

// ParseSegmentFileName returns the base offset a segment log file name
// stands for.
func ParseSegmentFileName(name string) (int64, bool) { return parseBase(name, logSuffix) }

// VerifySegmentFile checks a segment file copied (perhaps partly) into
// path for segment base: it walks its batches from the start, checking
// each header, the offset sequence and the CRC, and cuts the file after
// the last whole, valid batch and no further than limit (compacted
// segments, with gaps in their offsets, are accepted) (a torn copy, a
// crash while copying). It returns the kept length, which a resumed copy
// continues from, and the offset after the last kept batch.
func VerifySegmentFile(path string, base, limit int64) (size, next int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, base, fmt.Errorf("verify segment %d: %w", base, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, base, fmt.Errorf("verify segment %d: %w", base, err)
	}
	s := &segment{base: base, f: f, fd: int(f.Fd()), next: base, maxTS: -1}
	res, err := s.scan(0, min(fi.Size(), limit), base, true, true, DefaultIndexIntervalBytes)
	if err != nil {
		return 0, base, err
	}
	if res.end < fi.Size() {
		if err := f.Truncate(res.end); err != nil {
			return 0, base, fmt.Errorf("verify segment %d: cut at %d: %w", base, res.end, err)
		}
	}
	return res.end, s.next, nil
}

// WriteStartCheckpoint writes a log start offset checkpoint into dir (a
// log directory not open as a Log, such as a seeded copy), durably.
func WriteStartCheckpoint(dir string, off int64) error {
	tmp := filepath.Join(dir, checkpointName+".tmp")
	if err := writeFileSync(tmp, []byte("v1 "+strconv.FormatInt(off, 10)+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, checkpointName)); err != nil {
		return fmt.Errorf("write log start checkpoint: %w", err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// SwapDirs makes the directory from the log directory dir, keeping the
// old one as old until the caller removes it: old is removed first, dir is
// renamed to old (if it exists), from to dir, and the parent fsynced. Each
// step is a rename, so a crash leaves either directory complete; calling
// SwapDirs again after one finishes the job.
func SwapDirs(from, dir, old string) error {
	if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
		return nil // done already
	}
	if _, err := os.Stat(dir); err == nil {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("swap log directory: %w", err)
		}
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("swap log directory: %w", err)
		}
	}
	if err := os.Rename(from, dir); err != nil {
		return fmt.Errorf("swap log directory: %w", err)
	}
	return SyncDir(filepath.Dir(dir))
}

// Replace swaps the log's whole content for the segment files of dir from
// (a seeded copy of another replica's segments), with log start offset
// start: the old files move to old, from becomes the log's directory, and
// the log recovers from it as Open would (every batch of the new files is
// checked by CRC and their indexes are built), then old is removed.
// Slices of the old segments stay readable until released. The log is
// the same *Log afterwards, so its holders need not learn of the swap. A
// failure leaves the log failed; reopening the replica finishes or
// retries the swap (SwapDirs).
func (l *Log) Replace(ctx context.Context, from, old string, start int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.fence(); err != nil { // journal.go: the directory is replaced
		return fmt.Errorf("replace log: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return fmt.Errorf("replace log: %w", err)
	}
	if err := WriteStartCheckpoint(from, start); err != nil {
		return fmt.Errorf("replace log: %w", err)
	}
	segs := l.segs
	l.segs = nil
	for _, s := range segs {
		s.unref()
	}
	_ = l.dir.Close() // drops the flock with the old directory
	failed := func(err error) error {
		l.failed = err
		return fmt.Errorf("replace log: %w", err)
	}
	if err := SwapDirs(from, l.cfg.Dir, old); err != nil {
		return failed(err)
	}
	dir, err := os.Open(l.cfg.Dir)
	if err != nil {
		return failed(err)
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		return failed(err)
	}
	l.dir = dir
	l.gen++ // syncs in flight describe the old files
	l.dirGen, l.dirSync = 0, 0
	if err := l.recover(ctx); err != nil {
		return failed(err)
	}
	if err := os.RemoveAll(old); err != nil {
		l.cfg.Logger.Warn("remove replaced log directory", "dir", old, "err", err)
	}
	return nil
}
