package log

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// Re-cutting closed segments at given boundaries (see DESIGN.md, "Turning
// compaction on"). A log whose topic was not compacted when it rolled has
// segment boundaries chosen by its own clock, different on every replica;
// Clean works segment by segment, so such replicas would clean into
// different files. The replication layer's leader lists its own segment
// bases (Boundaries) in its compaction decision, and every replica, the
// leader included, re-cuts its closed segments below the last of them at
// exactly those bases (Recut) before it cleans: same batches, same
// boundaries, hence the same files. A log already cut so is left alone,
// which makes a re-cut idempotent, also after cleaning (cleaning keeps a
// segment's base and only drops batches or whole empty segments).
//
// Batches below the first boundary (the batch holding the replicated log
// start) are dropped and the log start moves up to it: they lie below the
// partition's log start, and another replica's retention may already have
// deleted them. The caller re-cuts only what its Raft snapshot covers, as
// it cleans, so no entry Raft may replay loses its batch.
//
// A re-cut writes "<base>.log.recut.cleaned" files and swaps them in with
// the cleaner's swap list (clean_swap.go), so a crash leaves either the old
// segments (the next re-cut starts again) or the new ones (Open finishes
// the list).

// ErrRecutNotReady says the log cannot be re-cut at the boundaries yet: no
// segment starts at the last boundary (the roll there is not stored yet).
// From Boundaries: the point asked for is not a segment base.
var ErrRecutNotReady = errors.New("log not ready for the re-cut")

// RecutResult says what a re-cut did.
type RecutResult struct {
	Segments     int   // segments written; 0 if the log was cut so already
	Replaced     int   // segments they replaced
	BytesWritten int64 // bytes written
}

// Boundaries lists this log's segment bases for a re-cut up to upTo on
// other replicas: first where the log start lies (pass the replicated
// one): the base of the batch holding it, or the base of its segment if
// that holds no batch at or above it (compaction emptied it); then every
// segment base above that up to upTo, which must itself be a segment
// base. It returns nil when nothing below upTo is to be cut.
func (l *Log) Boundaries(from, upTo int64) ([]int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	from = max(from, l.start)
	if len(l.segs) == 0 || from >= upTo || from >= l.next {
		return nil, nil
	}
	i := l.segmentFor(from)
	s := l.segs[i]
	first := s.base
	if from < s.next {
		var hb [HeaderSize]byte
		_, h, err := s.findBatch(from, &hb)
		if err != nil {
			return nil, fmt.Errorf("boundaries: %w", err)
		}
		first = max(first, min(h.BaseOffset, from))
	}
	if first >= upTo {
		return nil, nil
	}
	out := []int64{first}
	end := false
	for _, t := range l.segs[i+1:] {
		if t.base > upTo {
			break
		}
		out = append(out, t.base)
		end = t.base == upTo
	}
	if !end {
		return nil, fmt.Errorf("boundaries: %w: %d is not a segment base", ErrRecutNotReady, upTo)
	}
	return out, nil
}

// Recut re-cuts the closed segments below the last of bases (ascending)
// so that they start exactly at bases, dropping batches below the first.
// An interval between two bases with no batch gets no segment, but for the
// first one this log reaches. It runs under the cleaner's lock, reads and
// writes at most bytesPerSecond (0: no limit), and swaps the new segments
// in at once; ErrCleanConflict if the log changed meanwhile.
func (l *Log) Recut(ctx context.Context, bases []int64, bytesPerSecond int64) (RecutResult, error) {
	var res RecutResult
	if len(bases) < 2 || !slices.IsSorted(bases) || bases[0] < 0 {
		return res, fmt.Errorf("recut: boundaries %v must be two or more ascending offsets", bases)
	}
	if !l.Compacted() {
		return res, errors.New("recut: the log is not compacted: its own rolls would cut it again")
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	segs, keep, gen, err := l.recutPlan(bases)
	if err != nil || len(segs) == 0 {
		return res, err
	}
	defer func() {
		for _, c := range segs {
			c.seg.unref()
		}
	}()
	cl := &cleaner{l: l, segs: segs, res: &CleanResult{}}
	if bytesPerSecond > 0 {
		cl.lim = rate.NewLimiter(rate.Limit(bytesPerSecond), int(min(bytesPerSecond, 1<<30)))
	}
	if err := l.dir.Sync(); err != nil {
		return res, fmt.Errorf("recut: sync directory: %w", err)
	}
	outs, err := l.recutWrite(ctx, cl, bases, segs, keep, &res)
	if err != nil {
		removeRecutOutputs(l.cfg.Dir, outs)
		return res, fmt.Errorf("recut: %w", err)
	}
	hook("recut written")
	if err := l.swapRecut(segs, keep, gen, outs, &res); err != nil {
		removeRecutOutputs(l.cfg.Dir, outs)
		return res, fmt.Errorf("recut: %w", err)
	}
	return res, nil
}

// recutPlan picks the closed segments below the last base, with a
// reference on each, or none if they are cut at bases already. keep[i]
// says picked segment i is the only one in its interval and cut right
// already: it stays as it is (a leader re-cuts only its first segment).
func (l *Log) recutPlan(bases []int64) ([]*cleanSeg, []bool, uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, nil, 0, err
	}
	end := bases[len(bases)-1]
	k := slices.IndexFunc(l.segs, func(s *segment) bool { return s.base == end })
	if k < 0 {
		return nil, nil, 0, fmt.Errorf("recut: %w: no segment starts at %d", ErrRecutNotReady, end)
	}
	picked := l.segs[:k]
	touching := make([]int, len(bases))
	ok := make([]bool, len(picked))
	for i, s := range picked {
		j, found := slices.BinarySearch(bases, s.base)
		ok[i] = found && s.next <= bases[j+1]
		lo, hi := recutInterval(bases, s.base), recutInterval(bases, max(s.next-1, s.base))
		for j := max(lo, 0); j <= hi; j++ {
			touching[j]++
		}
	}
	keep := make([]bool, len(picked))
	cut := true
	for i, s := range picked {
		keep[i] = ok[i] && touching[recutInterval(bases, s.base)] == 1
		cut = cut && keep[i]
	}
	if cut {
		return nil, nil, 0, nil
	}
	out := make([]*cleanSeg, len(picked))
	for i, s := range picked {
		s.ref()
		out[i] = &cleanSeg{seg: s, size: s.size}
	}
	return out, keep, l.gen, nil
}

// recutInterval is the index of the last base at or below offset (-1 if
// offset is below the first).
func recutInterval(bases []int64, offset int64) int {
	j, found := slices.BinarySearch(bases, offset)
	if !found {
		j--
	}
	return j
}

// recutOut is one new segment file of a re-cut.
type recutOut struct {
	base int64
	name string
	size int64
}

// recutWrite copies the batches of the segments not kept into one new
// file per interval between bases that holds a batch (and the first
// interval reached).
func (l *Log) recutWrite(ctx context.Context, cl *cleaner, bases []int64, segs []*cleanSeg, keep []bool, res *RecutResult) ([]recutOut, error) {
	var outs []recutOut
	var f *os.File
	var w *bufio.Writer
	closeCur := func() error {
		if f == nil {
			return nil
		}
		err := w.Flush()
		if err == nil {
			err = unix.Fdatasync(int(f.Fd()))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		f = nil
		if err != nil {
			return fmt.Errorf("write %s: %w", outs[len(outs)-1].name, err)
		}
		return nil
	}
	open := func(base int64) error {
		if err := closeCur(); err != nil {
			return err
		}
		name := fmt.Sprintf("%020d%s.recut%s", base, logSuffix, cleanedSuffix)
		var err error
		f, err = os.OpenFile(filepath.Join(l.cfg.Dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		w = bufio.NewWriterSize(f, 256<<10)
		outs = append(outs, recutOut{base: base, name: name})
		return nil
	}
	interval := func(offset int64) int { return recutInterval(bases, offset) }
	// The first interval this log reaches gets a segment even if empty,
	// so that the log start stays where it is.
	if j := interval(max(segs[0].seg.base, bases[0])); j >= 0 && !keep[0] {
		if err := open(bases[j]); err != nil {
			return outs, err
		}
	}
	for i, cs := range segs {
		if keep[i] {
			continue
		}
		err := cl.eachBatch(ctx, cs, func(b []byte, h Header) (bool, error) {
			if h.BaseOffset < bases[0] {
				return true, nil // below the log start everywhere
			}
			base := bases[interval(h.BaseOffset)]
			if len(outs) == 0 || outs[len(outs)-1].base != base {
				if err := open(base); err != nil {
					return false, err
				}
			}
			if err := cl.throttle(ctx, len(b)); err != nil {
				return false, err
			}
			if _, err := w.Write(b); err != nil {
				return false, fmt.Errorf("write %s: %w", outs[len(outs)-1].name, err)
			}
			outs[len(outs)-1].size += int64(len(b))
			res.BytesWritten += int64(len(b))
			return true, nil
		})
		if err != nil {
			closeCur()
			return outs, err
		}
	}
	return outs, closeCur()
}

func removeRecutOutputs(dir string, outs []recutOut) {
	for _, o := range outs {
		os.Remove(filepath.Join(dir, o.name))
	}
}

// swapRecut swaps the new segments in for segs under the writer lock,
// unless the log changed since they were picked, and publishes them with
// rebuilt indexes.
func (l *Log) swapRecut(segs []*cleanSeg, keep []bool, gen uint64, outs []recutOut, res *RecutResult) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.beginSwap(segs, gen, "re-cut"); err != nil {
		return err
	}
	var entries []swapEntry
	fresh := map[int64]bool{}
	for _, o := range outs {
		entries = append(entries, swapEntry{base: o.base, file: o.name})
		fresh[o.base] = true
	}
	for i, cs := range segs {
		if !keep[i] && !fresh[cs.seg.base] {
			entries = append(entries, swapEntry{base: cs.seg.base, file: swapNoFile})
		}
	}
	if err := l.swapFiles(entries); err != nil {
		return err
	}
	now := l.cfg.Now()
	newSegs := make([]*segment, 0, len(outs)+len(segs))
	for i, cs := range segs {
		if keep[i] {
			newSegs = append(newSegs, cs.seg)
		}
	}
	for _, o := range outs {
		s, err := l.openRewritten(o.base, o.size, now, "re-cut")
		if err != nil {
			return err
		}
		newSegs = append(newSegs, s)
	}
	slices.SortFunc(newSegs, func(a, b *segment) int { return cmp.Compare(a.base, b.base) })
	l.mu.Lock()
	old := l.segs[:len(segs)]
	l.segs = append(newSegs, l.segs[len(segs):]...)
	if len(l.segs) > 0 {
		l.start = max(l.start, l.segs[0].base)
	}
	l.mu.Unlock()
	replaced := 0
	for i, s := range old {
		if !keep[i] {
			s.unref()
			replaced++
		}
	}
	res.Segments, res.Replaced = len(outs), replaced
	l.cfg.Logger.Info("re-cut log segments", "dir", l.cfg.Dir, "segments", res.Segments, "replaced", res.Replaced,
		"bytes", res.BytesWritten)
	return nil
}
