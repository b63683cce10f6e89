package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The cleaner's checkpoint (cleanCheckpointName) says where the log's last
// cleaning ended, with which decision, and which segments it left below
// that point. It lets the first cleaning after a restart map keys from
// there instead of from the first segment, and skip a cleaning with the
// decision it already applied. It is an optimisation only: Clean's bytes
// never depend on it. A checkpoint that is missing, unreadable, or does
// not describe the segments as they are is ignored, and the cleaning maps
// from the start, which gives the same output (TestCleanCheckpointSameBytes).
//
// What it claims is that below End every key has at most one record (the
// cleaning mapped every key below it) and that cleaning the segments it
// lists with Params changes nothing. Only the log's own writes can break
// that: appends go above the log end, retention and DeleteRecords remove
// whole head segments (the check accepts a list that lost its head), a
// re-cut or another cleaning rewrites segments (their sizes no longer
// match, or the next cleaning writes a new checkpoint), a truncation
// into the listed range removes the file before it cuts, and a replace
// (seeding) swaps in a directory that has none. The segment list (base and
// size of each) is checked at Open and before each skip, so a checkpoint
// from another state of the log is not trusted; within one log's history
// a segment's base and size name its bytes, since its batches are the
// Raft log's and a cleaning that removes any changes the size or writes a
// new checkpoint.

const cleanCheckpointName = "clean-checkpoint"

// cleanCheckpoint is the decoded file.
type cleanCheckpoint struct {
	End    int64
	Params checkpointParams
	Segs   []checkpointSeg // the closed segments wholly below End, in order
}

// checkpointParams are the CleanParams that decide a cleaning's bytes, in
// the milliseconds Clean uses them in.
type checkpointParams struct {
	UpTo, Now, DeleteRetentionMs, MinCompactionLagMs int64
	BoundTombstones                                  bool
	TombstonesBelow                                  int64
}

type checkpointSeg struct{ Base, Size int64 }

func paramsOf(p CleanParams) checkpointParams {
	c := checkpointParams{UpTo: p.UpTo, Now: p.Now, DeleteRetentionMs: p.DeleteRetention.Milliseconds(),
		MinCompactionLagMs: p.MinCompactionLag.Milliseconds(), BoundTombstones: p.BoundTombstones}
	if p.BoundTombstones {
		c.TombstonesBelow = p.TombstonesBelow
	}
	return c
}

func encodeCleanCheckpoint(c cleanCheckpoint) []byte {
	var b strings.Builder
	bound := 0
	if c.Params.BoundTombstones {
		bound = 1
	}
	p := c.Params
	fmt.Fprintf(&b, "v1\nend %d\nparams %d %d %d %d %d %d\n", c.End, p.UpTo, p.Now, p.DeleteRetentionMs, p.MinCompactionLagMs, bound, p.TombstonesBelow)
	for _, s := range c.Segs {
		fmt.Fprintf(&b, "seg %d %d\n", s.Base, s.Size)
	}
	return []byte(b.String())
}

// decodeCleanCheckpoint parses the file. Besides the framing it checks
// that the segments are in increasing order of base, non-negative in
// size, and all below End, and that End is at most UpTo.
func decodeCleanCheckpoint(b []byte) (cleanCheckpoint, error) {
	var c cleanCheckpoint
	bad := func(what string) (cleanCheckpoint, error) {
		return cleanCheckpoint{}, fmt.Errorf("read clean checkpoint: %s", what)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return bad("not newline-terminated")
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) < 3 || lines[0] != "v1" {
		return bad("unrecognized content")
	}
	ints := func(ln, tag string, n int) ([]int64, bool) {
		f := strings.Split(ln, " ")
		if len(f) != n+1 || f[0] != tag {
			return nil, false
		}
		out := make([]int64, n)
		for i, s := range f[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 || strconv.FormatInt(v, 10) != s {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	e, ok := ints(lines[1], "end", 1)
	if !ok {
		return bad(fmt.Sprintf("bad end line %q", lines[1]))
	}
	c.End = e[0]
	v, ok := ints(lines[2], "params", 6)
	if !ok || v[4] > 1 || v[4] == 0 && v[5] != 0 {
		return bad(fmt.Sprintf("bad params line %q", lines[2]))
	}
	c.Params = checkpointParams{UpTo: v[0], Now: v[1], DeleteRetentionMs: v[2], MinCompactionLagMs: v[3], BoundTombstones: v[4] == 1, TombstonesBelow: v[5]}
	if c.End > c.Params.UpTo {
		return bad(fmt.Sprintf("end %d above the compaction point %d", c.End, c.Params.UpTo))
	}
	for _, ln := range lines[3:] {
		s, ok := ints(ln, "seg", 2)
		if !ok {
			return bad(fmt.Sprintf("bad segment line %q", ln))
		}
		if s[0] >= c.End || len(c.Segs) > 0 && s[0] <= c.Segs[len(c.Segs)-1].Base {
			return bad(fmt.Sprintf("segment %d out of order or not below end %d", s[0], c.End))
		}
		c.Segs = append(c.Segs, checkpointSeg{Base: s[0], Size: s[1]})
	}
	return c, nil
}

// matches reports whether segs (the closed segments now wholly below
// c.End) are what c lists, but for head segments retention removed since.
func (c *cleanCheckpoint) matches(segs []checkpointSeg) bool {
	return len(segs) <= len(c.Segs) && slices.Equal(c.Segs[len(c.Segs)-len(segs):], segs)
}

// closedBelow lists the closed segments wholly below end. l.mu is held.
func (l *Log) closedBelow(end int64) []checkpointSeg {
	var out []checkpointSeg
	for k := 0; k+1 < len(l.segs) && l.segs[k+1].base <= end; k++ {
		out = append(out, checkpointSeg{Base: l.segs[k].base, Size: l.segs[k].size})
	}
	return out
}

// writeCleanCheckpoint replaces the checkpoint file durably (temp, fsync,
// rename, fsync directory). A crash before the rename leaves the previous
// checkpoint, which is still true: a cleaning only removes records.
func (l *Log) writeCleanCheckpoint(c cleanCheckpoint) error {
	tmp := filepath.Join(l.cfg.Dir, cleanCheckpointName+".tmp")
	if err := writeFileSync(tmp, encodeCleanCheckpoint(c)); err != nil {
		return fmt.Errorf("write clean checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(l.cfg.Dir, cleanCheckpointName)); err != nil {
		return fmt.Errorf("write clean checkpoint: %w", err)
	}
	if err := l.dir.Sync(); err != nil {
		return fmt.Errorf("write clean checkpoint: sync directory: %w", err)
	}
	return nil
}

// dropCleanCheckpoint forgets the checkpoint, in memory and durably on
// disk, before a write that would make it untrue (a truncation into the
// range it lists).
func (l *Log) dropCleanCheckpoint() error {
	l.mu.Lock()
	l.lastClean = nil
	l.cleanedGen = l.gen - 1 // no longer the current generation
	l.mu.Unlock()
	err := os.Remove(filepath.Join(l.cfg.Dir, cleanCheckpointName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("drop clean checkpoint: %w", err)
	}
	if err := l.dir.Sync(); err != nil {
		return fmt.Errorf("drop clean checkpoint: sync directory: %w", err)
	}
	return nil
}

// loadCleanCheckpoint reads the checkpoint at Open (or after a replace)
// and keeps it if it describes the segments as recovered; otherwise the
// next cleaning maps from the start. It never fails the open: the
// checkpoint only saves work. l.mu need not be held (recovery owns l).
func (l *Log) loadCleanCheckpoint() {
	l.lastClean, l.cleanedTo, l.cleanedGen = nil, 0, l.gen-1
	b, err := os.ReadFile(filepath.Join(l.cfg.Dir, cleanCheckpointName))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var c cleanCheckpoint
	if err == nil {
		c, err = decodeCleanCheckpoint(b)
	}
	if err == nil && (c.End > l.next || !c.matches(l.closedBelow(c.End))) {
		err = errors.New("it does not describe the segments as they are")
	}
	if err != nil {
		// Removed, so that no later state of the segments can match it by
		// chance.
		_ = os.Remove(filepath.Join(l.cfg.Dir, cleanCheckpointName))
		l.cfg.Logger.Warn("clean checkpoint ignored; the next cleaning maps keys from the first segment", "dir", l.cfg.Dir, "err", err)
		return
	}
	l.lastClean, l.cleanedTo, l.cleanedGen = &c, c.End, l.gen
}

// CleanedTo is where the log's last cleaning ended (from its checkpoint
// after a restart), or -1 if the log has no valid record of one: below it
// the log is compacted. The replication layer measures its dirty ratio
// from there.
func (l *Log) CleanedTo() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cleanedGen != l.gen {
		return -1
	}
	return l.cleanedTo
}
