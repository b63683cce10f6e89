package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// A tenant's move to another cell (DESIGN.md, "Tenant moves across
// cells"), as far as one partition takes part in it:
//
//   - The source partition is fenced by a replicated ControlFence entry:
//     from its index on it refuses produce and records its final end
//     offset, the high watermark there. Unfencing (a rollback) lifts it.
//   - The destination partition, a new group in another cell, is a
//     mirror: a ControlMirrorStart entry sets its log start and the
//     source's producer states, then mirror entries (raftlog
//     MirrorExtension) carry the source's batches at their own offsets.
//     It refuses produce until a ControlMirrorPromote entry, replicated
//     once it holds everything up to the source's fenced end.
//
// dataplane/mirror drives both through the methods below.

// Errors of a move. Produce returns the first two wrapped in the
// catalogue's NotLeader (Kafka NOT_LEADER_OR_FOLLOWER, retriable): a
// client refreshes its metadata and finds the partition's new home once
// the move has switched it; errors.Is sees them through that.
var (
	// ErrFenced: the partition is fenced for a move to another cell.
	ErrFenced = errors.New("partition: fenced for a move to another cell")
	// ErrMirroring: the partition mirrors another cell's and is not
	// promoted yet.
	ErrMirroring = errors.New("partition: mirrors another cell's partition, not promoted yet")
	// ErrNotMirror: a mirror call on a partition that is not a mirror in
	// progress (never started, or promoted).
	ErrNotMirror = errors.New("partition: not a mirror in progress")
	// ErrMirrorHole: mirror entries that followed source offsets this
	// partition does not hold (a leader change lost the ones before
	// them) were refused; pull again from the high watermark.
	ErrMirrorHole = errors.New("partition: mirror entry does not follow the mirrored offsets")
)

// mirrorState is a mirrored partition's part of fsmState. Values are
// replaced, never changed in place: a snapshot shares them.
type mirrorState struct {
	// ProducersAt is the source's high watermark when it took the
	// producer states the start entry installed: mirror entries below
	// it are in those states already.
	ProducersAt int64 `json:"producers_at"`
	Promoted    bool  `json:"promoted"`
	// EpochBase is the promote entry's epoch base: once promoted, every
	// leader epoch the partition exposes is it plus the Raft term
	// (mirror_epoch.go).
	EpochBase int32 `json:"epoch_base,omitempty"`
}

// fenceState is a fenced partition's part of fsmState (replaced, never
// changed in place).
type fenceState struct {
	// End is the high watermark when the fence applied: the offset the
	// destination must hold everything below before it is promoted.
	End int64 `json:"end"`
}

// moveGate orders produce against a fence on the leader: a Produce holds
// mu shared from its check to its end, Fence holds it exclusively while
// it hands the fence entry to Raft, so no batch this leader accepted can
// follow the fence in the log.
type moveGate struct {
	mu      sync.RWMutex
	pending bool // a fence entry is in flight; guarded by mu
}

// applyMirror applies a mirror entry: its batch is in the log at its own
// base offset (the store put it there), unless raftlog.MirrorApplies
// refuses it at the high watermark, which makes it a no-op on every
// replica (the store decided the same from the same entries). One that
// would leave a hole fails, so that its proposer pulls again.
func (f *fsm) applyMirror(l *raft.Log) interface{} {
	h, err := log.ParseHeader(l.Data)
	if err != nil {
		return applyResult{err: fmt.Errorf("apply mirror entry %d: %w", l.Index, err)}
	}
	prev, _ := raftlog.MirrorPrev(l.Extensions)
	f.mu.Lock()
	if hw := f.st.HighWatermark; !raftlog.MirrorApplies(h.BaseOffset, prev, hw) {
		f.mu.Unlock()
		if prev > hw {
			return applyResult{err: fmt.Errorf("apply mirror entry %d: %w: it follows source offset %d, the mirror holds offsets up to %d", l.Index, ErrMirrorHole, prev, hw)}
		}
		return applyResult{base: h.BaseOffset}
	}
	f.st.HighWatermark = h.NextOffset()
	hw := f.st.HighWatermark
	if n := len(f.st.Epochs); n == 0 || f.st.Epochs[n-1].Epoch < h.LeaderEpoch {
		f.st.Epochs = append(f.st.Epochs, EpochStart{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
	}
	// Not metered: the source metered it when it was produced.
	if m := f.st.Mirror; m == nil || h.BaseOffset >= m.ProducersAt {
		f.st.recordProducer(h)
	}
	f.mu.Unlock()
	if f.advanced != nil {
		f.advanced(hw)
	}
	return applyResult{base: h.BaseOffset}
}

// recordProducer records an idempotent batch in its producer's state, as
// Apply does for a produced one.
func (st *fsmState) recordProducer(h log.Header) {
	if h.ProducerID < 0 {
		return
	}
	if st.Producers == nil {
		st.Producers = map[int64]*ProducerState{}
	}
	ps := st.Producers[h.ProducerID]
	if ps == nil {
		if len(st.Producers) >= maxProducers {
			evictIdlest(st.Producers)
		}
		ps = &ProducerState{Epoch: h.ProducerEpoch}
		st.Producers[h.ProducerID] = ps
	}
	ps.record(h.ProducerEpoch, h.BaseSequence, lastSeq(h), h.BaseOffset)
}

// applyMove applies the fence, mirror start and promote entries. A
// refusal is the same on every replica: it depends on the state alone.
func (f *fsm) applyMove(l *raft.Log) interface{} {
	fail := func(err error) interface{} { return applyResult{err: fmt.Errorf("apply entry %d: %w", l.Index, err)} }
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.noteMove()
	switch raftlog.ControlKind(l.Data) {
	case raftlog.ControlFence:
		fence, err := raftlog.DecodeFence(l.Data)
		if err != nil {
			return fail(err)
		}
		switch {
		case !fence:
			f.st.Fence = nil
			return applyResult{base: f.st.HighWatermark}
		case f.st.Fence == nil:
			f.st.Fence = &fenceState{End: f.st.HighWatermark}
		}
		return applyResult{base: f.st.Fence.End}
	case raftlog.ControlMirrorStart:
		m, err := raftlog.DecodeMirrorStart(l.Data)
		if err != nil {
			return fail(err)
		}
		if f.st.Mirror != nil {
			return applyResult{base: f.st.LogStartOffset} // a second leader's start: already done
		}
		if f.st.HighWatermark != 0 || f.st.LogStartOffset != 0 {
			return fail(fmt.Errorf("%w: mirror start: the partition already holds offsets up to %d", ErrNotMirror, f.st.HighWatermark))
		}
		f.st.LogStartOffset = m.LogStart
		f.st.Producers = map[int64]*ProducerState{}
		for _, p := range m.Producers {
			ps := &ProducerState{Epoch: p.Epoch}
			for _, b := range p.Batches {
				ps.Batches = append(ps.Batches, ProducerBatch{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, BaseOffset: b.BaseOffset})
			}
			f.st.Producers[p.ID] = ps
		}
		f.st.Mirror = &mirrorState{ProducersAt: m.ProducersAt}
		return applyResult{base: m.LogStart}
	default: // raftlog.ControlMirrorPromote
		p, err := raftlog.DecodePromote(l.Data) // mirror_epoch.go
		if err != nil {
			return fail(err)
		}
		end := p.End
		switch m := f.st.Mirror; {
		case m == nil:
			return fail(fmt.Errorf("promote: %w", ErrNotMirror))
		case m.Promoted:
			return applyResult{base: f.st.HighWatermark}
		case f.st.HighWatermark != end:
			return fail(fmt.Errorf("promote at %d: %w: the mirror holds offsets up to %d", end, ErrNotMirror, f.st.HighWatermark))
		case len(l.Data) > 9 && p.EpochBase < f.lastEpoch():
			// Epochs after the promotion would not be above the mirrored
			// ones. (An entry of the older form has no base: it keeps
			// the terms as epochs, as before.)
			return fail(fmt.Errorf("promote at %d: %w: epoch base %d below the mirrored epoch %d", end, ErrNotMirror, p.EpochBase, f.lastEpoch()))
		default:
			f.st.Mirror = &mirrorState{ProducersAt: m.ProducersAt, Promoted: true, EpochBase: p.EpochBase}
		}
		return applyResult{base: end}
	}
}

// noteMove sets f.moving and f.epochBase from the state; f.mu is held.
func (f *fsm) noteMove() {
	f.moving.Store(f.st.Fence != nil || (f.st.Mirror != nil && !f.st.Mirror.Promoted))
	var base int32
	if m := f.st.Mirror; m != nil && m.Promoted {
		base = m.EpochBase
	}
	f.epochBase.Store(base)
}

func (f *fsm) move() (*mirrorState, *fenceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.Mirror, f.st.Fence
}

// Mirroring reports whether the partition mirrors another cell's and is
// not promoted: Config.Mirror until the start entry applies, then the
// replicated state.
func (r *Replica) Mirroring() bool {
	if m, _ := r.fsm.move(); m != nil {
		return !m.Promoted
	}
	return r.cfg.Mirror
}

// MirrorStarted reports whether the mirror's start entry applied here.
func (r *Replica) MirrorStarted() bool {
	m, _ := r.fsm.move()
	return m != nil
}

// Fenced reports whether the partition is fenced here and its final end
// offset.
func (r *Replica) Fenced() (end int64, ok bool) {
	if _, fs := r.fsm.move(); fs != nil {
		return fs.End, true
	}
	return 0, false
}

// MoveRefusesProduce reports whether produce is refused here because the
// partition is fenced, or being fenced, for a move to another cell.
func (r *Replica) MoveRefusesProduce() bool {
	r.move.mu.RLock()
	pending := r.move.pending
	r.move.mu.RUnlock()
	_, fenced := r.Fenced()
	return pending || fenced
}

// admitProduce refuses produce on a fenced or mirroring partition. On
// success the caller holds the move gate shared until it calls release.
func (r *Replica) admitProduce() (release func(), err error) {
	r.move.mu.RLock()
	if !r.move.pending && !r.fsm.moving.Load() && !r.cfg.Mirror {
		return r.move.mu.RUnlock, nil // no move: the FSM's lock is not taken
	}
	_, fs := r.fsm.move()
	switch {
	case r.move.pending || fs != nil:
		r.move.mu.RUnlock()
		return nil, catalog.NotLeader.Wrap(fmt.Errorf("produce: %w", ErrFenced),
			"the partition is moving to another cell; refresh metadata and retry")
	case r.Mirroring():
		r.move.mu.RUnlock()
		return nil, catalog.NotLeader.Wrap(fmt.Errorf("produce: %w", ErrMirroring),
			"the partition is being moved here and does not take produce yet; retry")
	}
	return r.move.mu.RUnlock, nil
}

// Fence replicates a fence on the leader and returns the partition's
// final end offset. Produce already accepted completes first; produce
// after it fails with ErrFenced. Fencing a fenced partition returns its
// end again.
func (r *Replica) Fence(ctx context.Context) (int64, error) {
	if !r.ready() {
		return 0, r.notLeader(nil)
	}
	r.move.mu.Lock()
	r.move.pending = true
	f := r.raft.ApplyLog(raft.Log{Data: raftlog.EncodeFence(true), Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))
	r.move.mu.Unlock()
	end, err := r.awaitApply(ctx, f)
	r.move.mu.Lock()
	r.move.pending = false
	r.move.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("fence: %w", err)
	}
	r.cfg.Logger.Info("partition fenced for a move", "replica", r.cfg.ID, "end_offset", end)
	return end, nil
}

// Unfence lifts a fence (a rollback of a move whose destination was not
// promoted; the caller makes sure it was not): produce is taken again.
func (r *Replica) Unfence(ctx context.Context) error {
	if !r.ready() {
		return r.notLeader(nil)
	}
	f := r.raft.ApplyLog(raft.Log{Data: raftlog.EncodeFence(false), Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))
	if _, err := r.awaitApply(ctx, f); err != nil {
		return fmt.Errorf("unfence: %w", err)
	}
	r.cfg.Logger.Info("partition unfenced", "replica", r.cfg.ID)
	return nil
}

// StartMirror replicates a mirror's start entry on the leader of a new,
// empty partition: its log start and the source's producer states.
func (r *Replica) StartMirror(ctx context.Context, m raftlog.MirrorStart) error {
	if !r.ready() {
		return r.notLeader(nil)
	}
	f := r.raft.ApplyLog(raft.Log{Data: raftlog.EncodeMirrorStart(m), Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))
	if _, err := r.awaitApply(ctx, f); err != nil {
		return fmt.Errorf("start mirror: %w", err)
	}
	return nil
}

// AppendMirror replicates source batches as mirror entries and waits for
// them: ProposeMirror, then its wait.
func (r *Replica) AppendMirror(ctx context.Context, from int64, batches [][]byte) (int64, error) {
	wait, err := r.ProposeMirror(ctx, from, batches)
	if err != nil {
		return 0, err
	}
	return wait()
}

// ProposeMirror hands source batches (raw, whole, in offset order, read
// from source offset from) to Raft as mirror entries on the leader of a
// started mirror, and returns a wait that answers the high watermark
// once they all applied. Batches below the high watermark are no-ops;
// batches that would follow a hole (entries before them were lost) fail
// with ErrMirrorHole. Several proposals may be in flight.
func (r *Replica) ProposeMirror(ctx context.Context, from int64, batches [][]byte) (wait func() (int64, error), err error) {
	if !r.ready() {
		return nil, r.notLeader(nil)
	}
	if m, _ := r.fsm.move(); m == nil || m.Promoted {
		return nil, fmt.Errorf("propose mirror: %w", ErrNotMirror)
	}
	heads := make([]log.Header, len(batches))
	for i, b := range batches {
		// Raft's leader fails hard on a batch its store refuses.
		if len(b) > MaxBatchCeiling {
			return nil, fmt.Errorf("propose mirror: %w: %d bytes", log.ErrBatchTooLarge, len(b))
		}
		if heads[i], err = log.ValidateBatch(b); err != nil {
			return nil, fmt.Errorf("propose mirror: %w", err)
		}
	}
	// Below the log start the mirror needs nothing: a pull that starts
	// there follows what the partition holds.
	if hw := r.fsm.highWatermark(); from > hw && from <= r.LogStartOffset() {
		from = hw
	}
	futures := make([]raft.ApplyFuture, 0, len(batches))
	var forget []func()
	prev := from
	for i, b := range batches {
		forget = append(forget, r.store.MarkChecked(b))
		futures = append(futures, r.raft.ApplyLog(raft.Log{Data: b, Extensions: raftlog.MirrorExt(prev)}, r.applyTimeout(ctx)))
		prev = heads[i].NextOffset()
	}
	return func() (int64, error) {
		defer func() {
			for _, f := range forget {
				f()
			}
		}()
		for _, f := range futures {
			if _, err := r.awaitApply(ctx, f); err != nil {
				return 0, fmt.Errorf("append mirror: %w", err)
			}
		}
		return r.fsm.highWatermark(), nil
	}, nil
}

// PromoteMirror replicates the promote entry on the leader of a mirror
// that holds everything below end, the source's fenced end offset: the
// partition takes produce from then on. sourceEpoch is the source's
// current leader epoch; the entry's epoch base is the larger of it and
// the newest mirrored epoch, so every epoch after the promotion (base +
// term, term ≥ 1) is above both (mirror_epoch.go). Promoting a promoted
// mirror is a no-op.
func (r *Replica) PromoteMirror(ctx context.Context, end int64, sourceEpoch int32) error {
	if !r.ready() {
		return r.notLeader(nil)
	}
	r.fsm.mu.Lock()
	base := max(sourceEpoch, r.fsm.lastEpoch(), 0)
	r.fsm.mu.Unlock()
	p := raftlog.MirrorPromote{End: end, EpochBase: base}
	f := r.raft.ApplyLog(raft.Log{Data: raftlog.EncodePromote(p), Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))
	if _, err := r.awaitApply(ctx, f); err != nil {
		return fmt.Errorf("promote mirror: %w", err)
	}
	r.cfg.Logger.Info("mirrored partition promoted", "replica", r.cfg.ID, "end_offset", end, "epoch_base", base)
	return nil
}

// MoveState is what a mirror reads of its source partition.
type MoveState struct {
	LogStart      int64
	HighWatermark int64
	Fenced        bool
	FencedEnd     int64 // when Fenced
	// LeaderEpoch is the leader's current Kafka leader epoch: a mirror's
	// promotion takes its epochs above it.
	LeaderEpoch int32
}

// MoveState is the leader's view of the partition for a mirror.
func (r *Replica) MoveState() (MoveState, error) {
	if !r.ready() {
		return MoveState{}, r.notLeader(nil)
	}
	st := MoveState{LogStart: r.LogStartOffset(), HighWatermark: r.fsm.highWatermark(), LeaderEpoch: r.LeaderEpoch()}
	st.FencedEnd, st.Fenced = r.Fenced()
	return st, nil
}

// MirrorSnapshot is the leader's producer states with the high watermark
// they hold at, and the log start: a mirror's start entry.
func (r *Replica) MirrorSnapshot() (raftlog.MirrorStart, error) {
	if !r.ready() {
		return raftlog.MirrorStart{}, r.notLeader(nil)
	}
	f := r.fsm
	f.mu.Lock()
	m := raftlog.MirrorStart{LogStart: max(f.st.LogStartOffset, f.store.LogStartOffset()), ProducersAt: f.st.HighWatermark}
	for pid, ps := range f.st.Producers {
		p := raftlog.MirrorProducer{ID: pid, Epoch: ps.Epoch}
		for _, b := range ps.Batches {
			p.Batches = append(p.Batches, raftlog.MirrorBatch{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, BaseOffset: b.BaseOffset})
		}
		m.Producers = append(m.Producers, p)
	}
	f.mu.Unlock()
	m.LogStart = min(m.LogStart, m.ProducersAt)
	slices.SortFunc(m.Producers, func(a, b raftlog.MirrorProducer) int { return cmp.Compare(a.ID, b.ID) })
	return m, nil
}

// ReadRaw returns whole batches from offset, up to maxBytes (at least
// one), below the leader's high watermark, as the log holds them.
func (r *Replica) ReadRaw(offset int64, maxBytes int) ([]byte, error) {
	res, err := r.FetchEpoch(-1, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	defer res.Slice.Release()
	b, err := res.Slice.AppendTo(nil)
	if err != nil {
		return nil, fmt.Errorf("read raw at %d: %w", offset, err)
	}
	return b, nil
}

// awaitApply waits for a control or mirror entry's future and returns
// its result's offset.
func (r *Replica) awaitApply(ctx context.Context, f raft.ApplyFuture) (int64, error) {
	res, err, ctxErr := r.waitApply(ctx, f)
	if ctxErr != nil {
		return 0, ctxErr
	}
	return res, err
}
