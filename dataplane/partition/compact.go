package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// Compaction of a compacted topic's partition (see DESIGN.md, "Log
// compaction"). The leader decides, every replica applies:
//
//   - Rolls. A compacted log rolls only where a ControlRoll entry lies
//     (raftlog/roll.go), so every replica's segments start at the same
//     offsets. The leader replicates one when its active segment reaches
//     segment.bytes or segment.ms (log.RollDue).
//   - Cleanings. The leader replicates a ControlClean entry: the
//     compaction point and the "now" that tombstone expiry and the
//     compaction lag are measured from, with the topic's delete.retention.ms
//     and min.compaction.lag.ms. The FSM folds each into one decision
//     (cleanDecision) whose three edges only move forward, the same on
//     every replica at the same index. Each replica's cleaner (off the
//     apply path, CompactionPass) runs log.Clean with exactly that
//     decision when it differs from the one it last applied.
//
// Why every replica ends with the same bytes: Clean's output depends only
// on the input batches, the segment boundaries and the decision; batches
// and boundaries are the same everywhere (one Raft log; replicated
// rolls), and cleaning with decision a and then b, whose edges are at or
// past a's, writes what cleaning with b alone writes (filtering composes,
// log.TestCleanComposes). So a replica that applies only the newest
// decision (it was down, or slow), or one seeded from a peer's segments
// (compacted or not yet), converges to the same files once it applies the
// decision its FSM holds. A replica cleans only below what its latest Raft
// snapshot covers (taking one first), because Raft replays the entries
// after its snapshot at a restart and must find their batches intact; the
// idempotent-producer state is in that snapshot, never re-derived from
// compacted batches.

// minRecleanStep is the least time between two cleanings that only time
// calls for (tombstones expiring, segments leaving the compaction lag):
// with delete.retention.ms=0 every pass would otherwise clean the whole
// log again.
const minRecleanStep = time.Minute

// CompactionSettings are a compacted topic's cleaner settings.
type CompactionSettings struct {
	// DeleteRetention is delete.retention.ms: how long a tombstone stays.
	DeleteRetention time.Duration
	// MinCompactionLag is min.compaction.lag.ms: a segment with a batch
	// younger than this is not compacted yet.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a log with dirty
	// segments is compacted at least this often, whatever its dirty
	// ratio. Zero: no bound.
	MaxCompactionLag time.Duration
	// MinDirtyRatio is min.cleanable.dirty.ratio: the leader compacts
	// once the closed segments past the last compaction are at least this
	// share of all closed segments.
	MinDirtyRatio float64
}

// cleanDecision is the replicated compaction decision: compact below
// UpTo, removing tombstones whose batch is older than Expiry and leaving
// segments with a batch newer than LagEdge (milliseconds since the epoch).
// All three only move forward.
type cleanDecision struct {
	UpTo    int64 `json:"up_to"`
	Expiry  int64 `json:"expiry_ms"`
	LagEdge int64 `json:"lag_edge_ms"`
	// Bases are the leader's segment bases below UpTo (log.Boundaries),
	// from the newest entry: every replica re-cuts its closed segments at
	// them before it cleans (log.Recut), which is a no-op on a log whose
	// segments were all cut at replicated rolls.
	Bases []int64 `json:"bases,omitempty"`
	// TombBelow is the highest compaction point of a decision made at
	// least delete.retention.ms before the newest one: only tombstones
	// below it may expire (log.CleanParams.BoundTombstones). Recent are
	// the decisions since, oldest first, until they are that old.
	TombBelow int64          `json:"tomb_below,omitempty"`
	Recent    []decisionMark `json:"recent,omitempty"`
	// Now is the newest "now" of the entries folded in, for the leader's
	// schedule.
	Now int64 `json:"now_ms"`
}

// decisionMark is one decision's "now" and compaction point.
type decisionMark struct {
	Now  int64 `json:"now_ms"`
	UpTo int64 `json:"up_to"`
}

// maxDecisionMarks bounds cleanDecision.Recent. Beyond it the two oldest
// marks merge into one with the older point and the newer time, which
// only delays tombstone expiry.
const maxDecisionMarks = 64

// foldMark adds decision (now, upTo) to d's recent marks and moves
// TombBelow up to the points of the marks now deleteRetentionMs old.
func (d *cleanDecision) foldMark(now, upTo, deleteRetentionMs int64) {
	marks := append(slices.Clone(d.Recent), decisionMark{Now: now, UpTo: upTo})
	cut := d.Now - deleteRetentionMs
	keep := marks[:0]
	for _, m := range marks {
		if m.Now <= cut {
			d.TombBelow = max(d.TombBelow, m.UpTo)
		} else {
			keep = append(keep, m)
		}
	}
	for len(keep) > maxDecisionMarks {
		keep[1].UpTo = keep[0].UpTo
		keep = keep[1:]
	}
	d.Recent = keep
}

// sameEdges reports whether two decisions clean alike (Now only
// schedules the leader).
func (d cleanDecision) sameEdges(o cleanDecision) bool {
	return d.UpTo == o.UpTo && d.Expiry == o.Expiry && d.LagEdge == o.LagEdge && d.TombBelow == o.TombBelow && slices.Equal(d.Bases, o.Bases)
}

// params is the decision as log.CleanParams.
func (d cleanDecision) params(bytesPerSecond int64) log.CleanParams {
	now := max(d.Expiry, d.LagEdge)
	return log.CleanParams{
		UpTo: d.UpTo, Now: now,
		DeleteRetention:  time.Duration(now-d.Expiry) * time.Millisecond,
		MinCompactionLag: time.Duration(now-d.LagEdge) * time.Millisecond,
		BytesPerSecond:   bytesPerSecond,
		BoundTombstones:  true, TombstonesBelow: d.TombBelow,
	}
}

// compactor is a replica's compaction state. mu guards it.
type compactor struct {
	mu       sync.Mutex
	settings CompactionSettings
	applied  *cleanDecision // the decision this replica last cleaned with
	end      int64          // the CleanResult.End of that cleaning
	stats    CompactionStats
}

// CompactionStats are a replica's cleaner totals since it opened.
type CompactionStats struct {
	Cleanings    int           // log.Clean runs that finished
	Passes       int           // their key-map passes
	BytesRead    int64         // segment bytes read
	BytesWritten int64         // segment bytes written
	Duration     time.Duration // time spent in log.Clean
	Recuts       int           // log.Recut runs that rewrote segments
	RecutBytes   int64         // bytes they wrote
	// Skipped counts cleanings with a decision this log had already
	// applied (its checkpoint says so, also across a restart): nothing
	// was read or written.
	Skipped int
	// CleanedBytes is the size, before cleaning, of the segments the
	// finished cleanings rewrote (log.CleanResult.BytesBefore).
	CleanedBytes int64
	// DirtyRatio is this replica's share of closed segment bytes past
	// its last compaction, measured at the end of each pass.
	DirtyRatio float64
}

// CompactionStats returns the cleaner's totals.
func (r *Replica) CompactionStats() CompactionStats {
	r.compact.mu.Lock()
	defer r.compact.mu.Unlock()
	return r.compact.stats
}

// CompactedTo is the compaction point of the replicated decision (-1 if
// there is none yet), and whether this replica has cleaned with exactly
// that decision.
func (r *Replica) CompactedTo() (upTo int64, applied bool) {
	d := r.fsm.cleanDecision()
	if d == nil {
		return -1, false
	}
	r.compact.mu.Lock()
	defer r.compact.mu.Unlock()
	return d.UpTo, r.compact.applied != nil && r.compact.applied.sameEdges(*d)
}

// applyClean folds a ControlClean entry into the decision. A point above
// the high watermark at its index is refused, the same on every replica.
func (f *fsm) applyClean(l *raft.Log) interface{} {
	c, err := raftlog.DecodeClean(l.Data)
	if err != nil {
		return applyResult{err: fmt.Errorf("apply entry %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.UpTo > f.st.HighWatermark {
		return applyResult{err: fmt.Errorf("apply entry %d: compaction point %d: %w: high watermark %d", l.Index, c.UpTo, log.ErrOffsetOutOfRange, f.st.HighWatermark)}
	}
	d := cleanDecision{UpTo: c.UpTo, Expiry: c.Now - c.DeleteRetentionMs, LagEdge: c.Now - c.MinCompactionLag, Now: c.Now, Bases: c.Bases}
	if p := f.st.Clean; p != nil {
		d = cleanDecision{UpTo: max(p.UpTo, d.UpTo), Expiry: max(p.Expiry, d.Expiry), LagEdge: max(p.LagEdge, d.LagEdge), Now: max(p.Now, d.Now), Bases: d.Bases}
		if c.UpTo < p.UpTo {
			d.Bases = p.Bases // an older point's list would not reach the folded one
		}
		d.TombBelow, d.Recent = p.TombBelow, p.Recent
	}
	d.foldMark(c.Now, c.UpTo, c.DeleteRetentionMs)
	f.st.Clean = &d
	return applyResult{base: d.UpTo}
}

// applyRoll notes where the store rolled the log for a ControlRoll entry:
// at the high watermark of its index, the same on every replica.
func (f *fsm) applyRoll() interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.LastRoll = f.st.HighWatermark
	return applyResult{base: f.st.LastRoll}
}

// lastRoll is the offset of the latest applied ControlRoll entry.
func (f *fsm) lastRoll() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.LastRoll
}

// cleanDecision returns a copy of the decision, nil if there is none yet.
func (f *fsm) cleanDecision() *cleanDecision {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Clean == nil {
		return nil
	}
	d := *f.st.Clean
	d.Bases, d.Recent = slices.Clone(d.Bases), slices.Clone(d.Recent)
	return &d
}

// CompactionPass is one pass of the broker's cleaner over this replica,
// with now as the leader's clock: the leader replicates a roll if its
// active segment is due, and a cleaning if its dirty ratio, the maximum
// compaction lag or tombstones due to expire call for one; then every
// replica cleans with the replicated decision if it has not yet, reading
// and writing at most bytesPerSecond (0: no limit). A replica of a topic
// that is not compacted, or one being seeded, does nothing.
func (r *Replica) CompactionPass(ctx context.Context, now time.Time, bytesPerSecond int64) error {
	l := r.store.Log()
	if !l.Compacted() || r.fsm.isBehind() {
		return nil
	}
	if r.ready() {
		if err := r.decideCompaction(ctx, now); err != nil {
			return err
		}
	}
	err := r.cleanLocal(ctx, bytesPerSecond)
	r.compact.mu.Lock()
	_, _, r.compact.stats.DirtyRatio = dirtyRatio(l, r.compact.end)
	r.compact.mu.Unlock()
	return err
}

// dirtyRatio is the share of l's closed segment bytes at or above end
// (the end of its last compaction), with the bytes below and above.
func dirtyRatio(l *log.Log, end int64) (clean, dirty int64, ratio float64) {
	clean, dirty = l.DirtyBytes(end)
	if clean+dirty > 0 {
		ratio = float64(dirty) / float64(clean+dirty)
	}
	return clean, dirty, ratio
}

// decideCompaction is the leader's part of a pass.
//
// A log whose active segment does not start at a replicated roll (its
// topic was not compacted when it rolled there: compaction was just
// turned on) is rolled first, so that the compaction point lies on a
// boundary every replica has. The decision lists the leader's segment
// bases below the point, from the batch holding the log start, and every
// replica re-cuts its closed segments at them before it cleans.
func (r *Replica) decideCompaction(ctx context.Context, now time.Time) error {
	l := r.store.Log()
	if l.RollDue() || l.ClosedEnd() != r.fsm.lastRoll() && l.NextOffset() > l.ClosedEnd() {
		if _, err := r.replicateControl(ctx, raftlog.EncodeRoll()); err != nil {
			return fmt.Errorf("roll: %w", err)
		}
	}
	r.compact.mu.Lock()
	s, end := r.compact.settings, r.compact.end
	r.compact.mu.Unlock()
	d := r.fsm.cleanDecision()
	upTo := min(l.ClosedEnd(), r.fsm.highWatermark(), r.fsm.lastRoll())
	clean, dirty, ratio := dirtyRatio(l, end)
	nowMs := now.UnixMilli()
	var due bool
	switch {
	case d == nil:
		due = dirty > 0 && ratio >= s.MinDirtyRatio
	case upTo > d.UpTo && dirty > 0:
		due = ratio >= s.MinDirtyRatio ||
			s.MaxCompactionLag > 0 && nowMs-d.Now >= s.MaxCompactionLag.Milliseconds()
	}
	// Tombstones (and segments held back by the compaction lag) become
	// removable as time passes with nothing new written: clean again once
	// the expiry edge has moved by a delete.retention.ms.
	if d != nil && !due && clean+dirty > 0 {
		step := max(s.DeleteRetention, minRecleanStep).Milliseconds()
		due = nowMs-s.DeleteRetention.Milliseconds()-d.Expiry >= step ||
			s.MinCompactionLag > 0 && dirty > 0 && nowMs-s.MinCompactionLag.Milliseconds()-d.LagEdge >= max(s.MinCompactionLag, minRecleanStep).Milliseconds()
	}
	if !due || upTo <= 0 {
		return nil
	}
	bases, err := l.Boundaries(r.fsm.logStart(), upTo)
	if errors.Is(err, log.ErrRecutNotReady) {
		return nil // the point is no segment base here (retention passed the last roll); the next roll fixes it
	}
	if err != nil {
		return fmt.Errorf("compaction decision: %w", err)
	}
	c := raftlog.Clean{UpTo: upTo, Now: nowMs, DeleteRetentionMs: s.DeleteRetention.Milliseconds(), MinCompactionLag: s.MinCompactionLag.Milliseconds(), Bases: bases}
	if _, err := r.replicateControl(ctx, raftlog.EncodeClean(c)); err != nil {
		return fmt.Errorf("compaction decision: %w", err)
	}
	r.cfg.Logger.Debug("partition compaction decided", "replica", r.cfg.ID, "up_to", upTo, "dirty_ratio", ratio)
	return nil
}

// cleanLocal runs log.Clean with the replicated decision if this replica
// has not cleaned with it yet.
func (r *Replica) cleanLocal(ctx context.Context, bytesPerSecond int64) error {
	d := r.fsm.cleanDecision()
	r.compact.mu.Lock()
	done := d == nil || r.compact.applied != nil && r.compact.applied.sameEdges(*d)
	r.compact.mu.Unlock()
	if done {
		return nil
	}
	// Raft replays the entries after its latest snapshot at a restart:
	// their batches must be whole, so clean only what a snapshot covers.
	if r.cleanCover() < d.UpTo {
		if stopped, err := r.await(r.raft.Snapshot()); stopped {
			return nil
		} else if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return fmt.Errorf("compact: snapshot: %w", err)
		}
		if r.cleanCover() < d.UpTo {
			return nil // the next pass tries again
		}
	}
	start := time.Now()
	if len(d.Bases) > 1 {
		rc, err := r.store.Log().Recut(ctx, d.Bases, bytesPerSecond)
		if errors.Is(err, log.ErrRecutNotReady) || errors.Is(err, log.ErrCleanConflict) {
			return nil // the roll at the point is not stored yet, or the log changed; the next pass retries
		}
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		if rc.Segments > 0 {
			r.compact.mu.Lock()
			r.compact.stats.Recuts++
			r.compact.stats.RecutBytes += rc.BytesWritten
			r.compact.mu.Unlock()
			r.cfg.Logger.Info("partition segments re-cut at the leader's boundaries", "replica", r.cfg.ID,
				"segments", rc.Segments, "replaced", rc.Replaced, "bytes", rc.BytesWritten)
		}
	}
	res, err := r.store.Log().Clean(ctx, d.params(bytesPerSecond))
	if errors.Is(err, log.ErrCleanConflict) {
		return nil // retention or a truncation changed the log; the next pass retries
	}
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	r.compact.mu.Lock()
	r.compact.applied, r.compact.end = d, res.End
	st := &r.compact.stats
	if res.Skipped {
		st.Skipped++
		r.compact.mu.Unlock()
		return nil
	}
	st.Cleanings++
	st.CleanedBytes += res.BytesBefore
	st.Passes += res.Passes
	st.BytesRead += res.BytesRead
	st.BytesWritten += res.BytesWritten
	st.Duration += time.Since(start)
	r.compact.mu.Unlock()
	r.cfg.Logger.Debug("partition compacted", "replica", r.cfg.ID, "end", res.End, "bytes_before", res.BytesBefore,
		"bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved)
	return nil
}

// cleanCover is the offset below which no batch is needed by the Raft
// entries after the latest snapshot: the snapshot's Kafka offset, or the
// whole log when the snapshot is at or past every stored entry (a
// replica just seeded, or idle since its last snapshot).
func (r *Replica) cleanCover() int64 {
	idx, cover := r.snapshotCover()
	if last, err := r.store.LastIndex(); err == nil && idx > 0 && idx >= last {
		return r.store.Log().NextOffset()
	}
	return cover
}

// replicateControl replicates a control entry and waits for it to be
// applied here.
func (r *Replica) replicateControl(ctx context.Context, data []byte) (int64, error) {
	return r.awaitApply(ctx, r.raft.ApplyLog(raft.Log{Data: data, Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))) // mirror.go
}
