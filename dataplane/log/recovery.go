package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const checkpointName = "log-start-offset"

// RecoveryReport says what Open found and what it repaired.
type RecoveryReport struct {
	Segments        int     // segments kept
	RebuiltIndexes  []int64 // base offsets of segments whose index files were rebuilt
	CutSegment      int64   // base offset of the segment whose tail was cut, or -1
	CutPosition     int64   // byte position of the cut
	BytesCut        int64   // bytes removed from that segment
	Reason          string  // why the tail was cut
	DroppedSegments []int64 // segments deleted because they followed the cut
	// RemovedBelowStart lists segments wholly below the checkpointed log
	// start that an interrupted delete-head left behind; no data is lost.
	RemovedBelowStart []int64
	LogStartOffset    int64
	NextOffset        int64
}

// Cut reports whether recovery removed any data.
func (r RecoveryReport) Cut() bool { return r.CutSegment >= 0 || len(r.DroppedSegments) > 0 }

// Open opens or creates the partition log in cfg.Dir and recovers it: the
// last segment is scanned by length, offset sequence and CRC and cut at the
// first torn or corrupt batch; earlier segments, which were synced when they
// were rolled, are checked from their last index entry to the end, and their
// index files are rebuilt from the log if missing or damaged. Everything
// kept is fsynced before Open returns. ctx cancels a long recovery.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	dir, err := os.Open(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		return nil, fmt.Errorf("open log %s: another process holds it: %w", cfg.Dir, err)
	}
	l := &Log{cfg: cfg, dir: dir, gaps: cfg.Compacted || hasCompactedMark(cfg.Dir)}
	if err := l.journalDir(); err != nil {
		dir.Close()
		return nil, fmt.Errorf("open log: %w", err)
	}
	if cfg.Compacted {
		if err := markCompacted(cfg.Dir, dir); err != nil {
			dir.Close()
			return nil, fmt.Errorf("open log %s: %w", cfg.Dir, err)
		}
	}
	if err := l.recover(ctx); err != nil {
		for _, s := range l.segs {
			s.unref()
		}
		dir.Close()
		return nil, fmt.Errorf("open log %s: %w", cfg.Dir, err)
	}
	return l, nil
}

func (l *Log) recover(ctx context.Context) error {
	rep := RecoveryReport{CutSegment: -1}
	if err := l.finishCleanSwap(); err != nil {
		return err
	}
	names, err := l.dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	var bases []int64
	logs := map[int64]bool{}
	for _, n := range names {
		if strings.HasSuffix(n, logSuffix) {
			if b, ok := parseBase(n, logSuffix); ok {
				bases = append(bases, b)
				logs[b] = true
			}
		}
	}
	for _, n := range names {
		b, ok := parseBase(n, indexSuffix)
		if !ok {
			b, ok = parseBase(n, timeIndexSuffix)
		}
		if ok && !logs[b] {
			_ = os.Remove(filepath.Join(l.cfg.Dir, n)) // index of a deleted segment
		}
		if strings.HasSuffix(n, ".tmp") {
			_ = os.Remove(filepath.Join(l.cfg.Dir, n))
		}
	}
	slices.Sort(bases)
	start, err := readCheckpoint(l.cfg.Dir)
	if err != nil {
		return err
	}
	now := l.cfg.Now()
	var want int64 = -1
	for i, base := range bases {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A compacted segment may end below the next one's base; only an
		// overlap means the files do not belong together.
		if want >= 0 && (base < want || base > want && !l.gaps) {
			rep.DroppedSegments = append(rep.DroppedSegments, bases[i:]...)
			if rep.Reason == "" {
				rep.Reason = fmt.Sprintf("segment %d overlaps segment %d, which ends at %d", base, bases[i-1], want)
				if base > want {
					rep.Reason = fmt.Sprintf("segment %d does not start where segment %d ends (%d)", base, bases[i-1], want)
				}
			}
			break
		}
		s, err := openSegment(l.cfg.Dir, base, false, now)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		fi, err := s.f.Stat()
		if err != nil {
			return fmt.Errorf("stat segment %d: %w", base, err)
		}
		size := fi.Size()
		last := i == len(bases)-1
		from, fromBase := int64(0), base
		rebuilt := false
		if !last && s.loadIndexes(size) {
			from, fromBase = s.trimIndex(size)
		} else {
			s.resetIndex()
			rebuilt = !last
		}
		// In a compacted log gaps are accepted in every segment, the last
		// too: a truncation may make a cleaned segment the active one
		// again. Every batch is still checked by CRC and offsets must grow.
		res, err := s.scan(from, size, fromBase, true, l.gaps, l.cfg.IndexIntervalBytes)
		if err != nil {
			return err
		}
		s.size, s.synced = res.end, res.end
		if res.end < size {
			if err := s.f.Truncate(res.end); err != nil {
				return fmt.Errorf("cut segment %d at %d: %w", base, res.end, err)
			}
			rep.CutSegment, rep.CutPosition, rep.BytesCut, rep.Reason = base, res.end, size-res.end, res.reason
			rebuilt = rebuilt || !last
			rep.DroppedSegments = append(rep.DroppedSegments, bases[i+1:]...)
		}
		if err := unix.Fdatasync(s.fd); err != nil {
			return fmt.Errorf("sync segment %d: %w", base, err)
		}
		if !last && res.end == size {
			s.finishTimeIndex()
		}
		if rebuilt && res.end == size {
			// A closed segment gets its index files back.
			if err := s.writeIndexes(); err != nil {
				return err
			}
			rep.RebuiltIndexes = append(rep.RebuiltIndexes, base)
		}
		want = s.next
		if res.end < size {
			break
		}
	}
	for _, b := range rep.DroppedSegments {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := os.Remove(segmentPath(l.cfg.Dir, b, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("drop segment %d: %w", b, err)
			}
		}
	}
	if len(l.segs) == 0 {
		s, err := openSegment(l.cfg.Dir, max(start, 0), true, now)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	if err := l.dir.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	l.next = l.segs[len(l.segs)-1].next
	l.durable = l.next
	l.start = max(start, l.segs[0].base)
	if l.start > l.next {
		l.start = l.next
	}
	// Segments wholly below the start are left over from a delete-head
	// whose unlinks did not reach the disk; finish the job.
	for len(l.segs) > 1 && l.segs[1].base <= l.start {
		rep.RemovedBelowStart = append(rep.RemovedBelowStart, l.segs[0].base)
		removeSegmentFiles(l.segs[0])
		l.segs = l.segs[1:]
	}
	rep.Segments, rep.LogStartOffset, rep.NextOffset = len(l.segs), l.start, l.next
	l.report = rep
	l.loadCleanCheckpoint()
	args := []any{"dir", l.cfg.Dir, "segments", rep.Segments, "log_start_offset", rep.LogStartOffset, "next_offset", rep.NextOffset,
		"removed_below_start", len(rep.RemovedBelowStart)}
	if rep.Cut() {
		args = append(args, "cut_segment", rep.CutSegment, "cut_position", rep.CutPosition, "bytes_cut", rep.BytesCut,
			"dropped_segments", len(rep.DroppedSegments), "reason", rep.Reason)
		l.cfg.Logger.Warn("partition log recovered with data cut", args...)
	} else {
		l.cfg.Logger.Info("partition log opened", append(args, "rebuilt_indexes", len(rep.RebuiltIndexes))...)
	}
	return nil
}

func parseBase(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	b, err := strconv.ParseInt(stem, 10, 64)
	return b, err == nil && b >= 0
}

// readCheckpoint reads the log start offset file: "v1 <offset>\n".
func readCheckpoint(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log start checkpoint: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != "v1" {
		return 0, fmt.Errorf("read log start checkpoint: unrecognized content %q", b)
	}
	off, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("read log start checkpoint: bad offset %q", f[1])
	}
	return off, nil
}

// writeCheckpoint replaces the log start offset file atomically: write a
// temporary file, fsync it, rename it over the old one, fsync the directory.
func (l *Log) writeCheckpoint(off int64) error {
	tmp := filepath.Join(l.cfg.Dir, checkpointName+".tmp")
	if err := writeFileSync(tmp, []byte("v1 "+strconv.FormatInt(off, 10)+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(l.cfg.Dir, checkpointName)); err != nil {
		return fmt.Errorf("write log start checkpoint: %w", err)
	}
	if err := l.dir.Sync(); err != nil {
		return fmt.Errorf("write log start checkpoint: sync directory: %w", err)
	}
	return nil
}
