package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A cleaning swaps several segment files at once, crash-safely. The cleaner
// writes every new segment file under a ".cleaned" name and fsyncs it, then
// writes the swap list (cleanSwapName) with write-temp, fsync, rename,
// fsync-directory: that rename is the commit point. Applying the list
// removes each old segment's index files, renames the new file over the old
// .log (or removes the .log of a segment left empty), fsyncs the directory
// and removes the list. Open applies a list it finds before anything else,
// so a crash before the commit point leaves the old segments (the
// ".cleaned" leftovers are removed), and one after it the new ones.

const (
	cleanSwapName = "clean-swap"
	cleanedSuffix = ".cleaned"
	swapNoFile    = "-"
)

// swapEntry replaces segment base's log file with file (a ".cleaned" name
// in the log directory), or removes it if file is swapNoFile.
type swapEntry struct {
	base int64
	file string
}

func encodeSwapList(entries []swapEntry) []byte {
	var b strings.Builder
	b.WriteString("v1\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %s\n", e.base, e.file)
	}
	return []byte(b.String())
}

func decodeSwapList(b []byte) ([]swapEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || lines[0] != "v1" {
		return nil, fmt.Errorf("read clean swap list: unrecognized content")
	}
	var out []swapEntry
	for _, ln := range lines[1:] {
		f := strings.Fields(ln)
		if len(f) != 2 {
			return nil, fmt.Errorf("read clean swap list: bad line %q", ln)
		}
		base, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || base < 0 {
			return nil, fmt.Errorf("read clean swap list: bad base offset %q", f[0])
		}
		if f[1] != swapNoFile && (!strings.HasSuffix(f[1], cleanedSuffix) || filepath.Base(f[1]) != f[1]) {
			return nil, fmt.Errorf("read clean swap list: bad file name %q", f[1])
		}
		out = append(out, swapEntry{base: base, file: f[1]})
	}
	return out, nil
}

// commitCleanSwap writes the swap list durably: the commit point.
func commitCleanSwap(dir string, entries []swapEntry) error {
	tmp := filepath.Join(dir, cleanSwapName+".tmp")
	if err := writeFileSync(tmp, encodeSwapList(entries)); err != nil {
		return fmt.Errorf("commit clean swap: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, cleanSwapName)); err != nil {
		return fmt.Errorf("commit clean swap: %w", err)
	}
	return SyncDir(dir)
}

// swapFiles commits entries and applies them, under the writer lock of
// a cleaning or a re-cut; a failure of either fails the log.
func (l *Log) swapFiles(entries []swapEntry) error {
	hook("commit")
	if err := commitCleanSwap(l.cfg.Dir, entries); err != nil {
		l.fail(err)
		return err
	}
	hook("committed")
	if err := applyCleanSwap(l.cfg.Dir); err != nil {
		l.fail(err)
		return err
	}
	hook("swapped")
	return nil
}

// cleanHook, when set by a test, is called at each step of a swap; the
// crash tests exit the process there.
var cleanHook func(step string)

func hook(step string) {
	if cleanHook != nil {
		cleanHook(step)
	}
}

// applyCleanSwap applies the swap list in dir, if there is one, and removes
// leftover ".cleaned" files. Applying a list twice is harmless: an entry
// whose new file is gone was applied already.
func applyCleanSwap(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, cleanSwapName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("apply clean swap: %w", err)
	}
	if err == nil {
		entries, err := decodeSwapList(b)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := applySwapEntry(dir, e); err != nil {
				return err
			}
			hook("entry")
		}
		if err := SyncDir(dir); err != nil {
			return fmt.Errorf("apply clean swap: %w", err)
		}
		hook("applied")
		if err := os.Remove(filepath.Join(dir, cleanSwapName)); err != nil {
			return fmt.Errorf("apply clean swap: %w", err)
		}
		if err := SyncDir(dir); err != nil {
			return fmt.Errorf("apply clean swap: %w", err)
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("apply clean swap: %w", err)
	}
	for _, n := range names {
		if strings.HasSuffix(n.Name(), cleanedSuffix) || n.Name() == cleanSwapName+".tmp" {
			if err := os.Remove(filepath.Join(dir, n.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("apply clean swap: %w", err)
			}
		}
	}
	return nil
}

func applySwapEntry(dir string, e swapEntry) error {
	removeIdx := func() error {
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			if err := os.Remove(segmentPath(dir, e.base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("apply clean swap: segment %d: %w", e.base, err)
			}
		}
		return nil
	}
	if e.file == swapNoFile {
		if err := removeIdx(); err != nil {
			return err
		}
		if err := os.Remove(segmentPath(dir, e.base, logSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("apply clean swap: segment %d: %w", e.base, err)
		}
		return nil
	}
	src := filepath.Join(dir, e.file)
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return nil // applied already
	}
	// The old index files go first: they describe the old file, and a
	// closed segment without them has them rebuilt from the log.
	if err := removeIdx(); err != nil {
		return err
	}
	if err := os.Rename(src, segmentPath(dir, e.base, logSuffix)); err != nil {
		return fmt.Errorf("apply clean swap: segment %d: %w", e.base, err)
	}
	return nil
}

// finishCleanSwap is applyCleanSwap for Open.
func (l *Log) finishCleanSwap() error { return applyCleanSwap(l.cfg.Dir) }

// swapCleaned swaps the cleaned files in for segs under the writer lock,
// unless the log changed since they were picked, and publishes new
// segments with rebuilt indexes. A segment left empty is removed, but for
// the log's first, which stays (empty) so the log start does not move.
func (l *Log) swapCleaned(segs []*cleanSeg, gen uint64, p CleanParams, res *CleanResult) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.beginSwap(segs, gen, "cleaned"); err != nil {
		return err
	}
	var entries []swapEntry
	for i, cs := range segs {
		if cs.file == nil {
			continue // not rewritten
		}
		e := swapEntry{base: cs.seg.base, file: cs.name}
		if cs.size == 0 && i > 0 {
			e.file = swapNoFile
		}
		entries = append(entries, e)
	}
	if err := l.swapFiles(entries); err != nil {
		return err
	}
	fresh := make([]*segment, 0, len(segs))
	now := l.cfg.Now()
	for _, cs := range segs {
		if cs.file == nil {
			fresh = append(fresh, cs.seg) // unchanged by the cleaning
			res.BytesAfter += cs.size
			continue
		}
		if cs.size == 0 && cs.seg != segs[0].seg {
			res.SegmentsRemoved++
			continue
		}
		s, err := l.openRewritten(cs.seg.base, cs.size, now, "cleaned")
		if err != nil {
			return err
		}
		res.Segments++
		res.BytesAfter += cs.size
		fresh = append(fresh, s)
	}
	l.mu.Lock()
	old := l.segs[:len(segs)]
	l.segs = append(fresh, l.segs[len(segs):]...)
	var ck *cleanCheckpoint
	if l.gen == gen {
		ck = &cleanCheckpoint{End: res.End, Params: paramsOf(p), Segs: l.closedBelow(res.End)}
		l.cleanedTo, l.cleanedGen, l.lastClean = res.End, gen, ck
	}
	l.mu.Unlock()
	if ck != nil {
		hook("checkpoint")
		if err := l.writeCleanCheckpoint(*ck); err != nil {
			// The previous checkpoint, if it is still there, is still
			// true; a restart then maps from further back.
			l.cfg.Logger.Warn("write clean checkpoint", "dir", l.cfg.Dir, "err", err)
		}
	}
	for i, s := range old {
		if segs[i].file != nil {
			s.unref()
		}
	}
	for _, cs := range segs {
		if cs.file != nil {
			cs.file.Close()
			cs.file = nil
		}
	}
	l.cfg.Logger.Info("cleaned log segments", "dir", l.cfg.Dir, "segments", res.Segments, "removed", res.SegmentsRemoved,
		"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "passes", res.Passes)
	return nil
}

// beginSwap, under the writer lock, checks that the log still starts with
// segs as of generation gen (stillPicked) and fences the journal, since
// files are about to be replaced (journal.go); what names the rewrite.
func (l *Log) beginSwap(segs []*cleanSeg, gen uint64, what string) error {
	if err := l.stillPicked(segs, gen); err != nil {
		return err
	}
	if err := l.fence(); err != nil {
		return fmt.Errorf("swap %s segments: %w", what, err)
	}
	return nil
}

// stillPicked reports, under the writer lock, whether the log is usable
// and still starts with segs as of generation gen (ErrCleanConflict if it
// changed since they were picked for a rewrite).
func (l *Log) stillPicked(segs []*cleanSeg, gen uint64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return err
	}
	same := l.gen == gen && len(l.segs) > len(segs)
	for i := 0; same && i < len(segs); i++ {
		same = l.segs[i] == segs[i].seg
	}
	if !same {
		return ErrCleanConflict
	}
	return nil
}

// openRewritten opens the rewritten (cleaned or re-cut) segment file of
// base, size bytes, swapped in under the writer lock, and rebuilds its
// indexes; a failure fails the log. what names the rewrite in the log.
func (l *Log) openRewritten(base, size int64, now time.Time, what string) (*segment, error) {
	s, err := openSegment(l.cfg.Dir, base, false, now)
	if err != nil {
		l.fail(err)
		return nil, err
	}
	if _, err := s.scan(0, size, s.base, false, true, l.cfg.IndexIntervalBytes); err != nil {
		s.unref()
		l.fail(err)
		return nil, err
	}
	s.size, s.synced = size, size
	s.finishTimeIndex()
	if err := s.writeIndexes(); err != nil {
		// Open rebuilds missing or torn index files.
		l.cfg.Logger.Warn("write "+what+" segment indexes", "dir", l.cfg.Dir, "segment", s.base, "err", err)
	}
	return s, nil
}
