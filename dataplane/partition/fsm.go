package partition

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// EpochStart is the first Kafka offset written in a leader epoch, for
// OffsetForLeaderEpoch.
type EpochStart struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// fsmState is the whole replicated state besides the log itself. It is
// small: a snapshot is this struct, never partition data.
type fsmState struct {
	// HighWatermark is the Kafka offset after the last applied data entry.
	HighWatermark int64        `json:"high_watermark"`
	Epochs        []EpochStart `json:"epochs"`
	// LogStartOffset is the partition's log start offset: the first
	// offset readers may read. It moves only forward, and only by a
	// replicated control entry (retention's or DeleteRecords' decision),
	// so every replica has the same one at the same Raft index. The
	// partition log's own start (what it deleted) lags it until a Raft
	// snapshot covers the deleted entries (retention.go).
	LogStartOffset int64 `json:"log_start_offset"`
	// Producers is the idempotent-producer state by producer id: what the
	// leader checks sequences against, rebuilt by every replica from the
	// entries it applies.
	Producers map[int64]*ProducerState `json:"producers,omitempty"`
	// Meter is the produce metering (meter.go).
	Meter meterState `json:"meter"`
	// Clean is the replicated compaction decision (compact.go); nil
	// until the leader of a compacted topic makes one.
	Clean *cleanDecision `json:"clean,omitempty"`
	// Mirror and Fence are a move's state (mirror.go): nil unless this
	// partition mirrors another cell's, or is fenced for a move.
	Mirror *mirrorState `json:"mirror,omitempty"`
	Fence  *fenceState  `json:"fence,omitempty"`
	// LastRoll is the Kafka offset of the latest ControlRoll entry: where
	// every replica's store rolled the log (compact.go).
	LastRoll int64 `json:"last_roll,omitempty"`
}

// fsm applies committed entries. Raft's FSM goroutine calls Apply and
// Snapshot; readers call state.
type fsm struct {
	store interface {
		LogStartOffset() int64
		NextOffset() int64
	}
	logger *slog.Logger
	// advanced, if set, is called (outside mu) with the new high
	// watermark after each entry that moved it.
	advanced func(hw int64)
	// onBehind, if set, is called (outside mu, on Raft's FSM goroutine,
	// before Restore returns) when a restored snapshot leaves the replica
	// behind: it must not block (it starts the seeding, seed.go).
	onBehind func()
	// restored, if set, is called first in Restore (on Raft's FSM
	// goroutine) and reports whether the store cannot take the entries
	// after the snapshot, having cut an uncommitted tail the snapshot
	// overrules (diverge.go). follows reports whether the store can take
	// the entry after the latest snapshot; caughtUp requires it.
	restored func() (stale bool)
	follows  func() bool

	// behind is set when a snapshot install brought state for data this
	// replica's log does not hold (it was behind the leader's log start):
	// the replica then serves nothing (see DESIGN.md, catch-up). Atomic:
	// every produce and fetch reads it.
	behind atomic.Bool
	// moving is set while the state holds a fence or an unpromoted mirror
	// (mirror.go, noteMove), so produce checks a move without mu.
	moving atomic.Bool
	// epochBase is a promoted mirror's epoch base, else 0 (mirror_epoch.go,
	// set by noteMove), so produce and fetch read it without mu.
	epochBase atomic.Int32

	// mu guards the field below.
	mu sync.Mutex
	st fsmState
}

// applyResult is what Apply returns for a data entry.
type applyResult struct {
	base int64
	err  error
}

func (f *fsm) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	if raftlog.IsControl(l.Type, l.Extensions) {
		return f.applyControl(l)
	}
	if raftlog.IsMirror(l.Type, l.Extensions) {
		return f.applyMirror(l) // mirror.go
	}
	h, err := log.ParseHeader(l.Data)
	if err != nil {
		return applyResult{err: fmt.Errorf("apply entry %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	moved := h.NextOffset() > f.st.HighWatermark
	if moved {
		f.st.HighWatermark = h.NextOffset()
	}
	hw := f.st.HighWatermark
	if n := len(f.st.Epochs); n == 0 || f.st.Epochs[n-1].Epoch < h.LeaderEpoch {
		f.st.Epochs = append(f.st.Epochs, EpochStart{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
	}
	f.st.Meter.add(h, len(l.Data))
	if h.ProducerID >= 0 {
		if f.st.Producers == nil {
			f.st.Producers = map[int64]*ProducerState{}
		}
		ps := f.st.Producers[h.ProducerID]
		if ps == nil {
			if len(f.st.Producers) >= maxProducers {
				evictIdlest(f.st.Producers)
			}
			ps = &ProducerState{Epoch: h.ProducerEpoch}
			f.st.Producers[h.ProducerID] = ps
		}
		ps.record(h.ProducerEpoch, h.BaseSequence, lastSeq(h), h.BaseOffset)
	}
	f.mu.Unlock()
	if moved && f.advanced != nil {
		f.advanced(hw)
	}
	return applyResult{base: h.BaseOffset}
}

// applyControl applies a control entry. A log start decision above the
// high watermark at its index is refused, the same on every replica.
func (f *fsm) applyControl(l *raft.Log) interface{} {
	switch raftlog.ControlKind(l.Data) {
	case raftlog.ControlMeterClose:
		return f.applyMeterClose(l) // meter.go
	case raftlog.ControlClean:
		return f.applyClean(l) // compact.go
	case raftlog.ControlRoll:
		return f.applyRoll() // the store rolled the log when it stored the entry; compact.go
	case raftlog.ControlFence, raftlog.ControlMirrorStart, raftlog.ControlMirrorPromote:
		return f.applyMove(l) // mirror.go
	}
	off, err := raftlog.DecodeLogStart(l.Data)
	if err != nil {
		return applyResult{err: fmt.Errorf("apply entry %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if off > f.st.HighWatermark {
		return applyResult{err: fmt.Errorf("apply entry %d: log start %d: %w: high watermark %d", l.Index, off, log.ErrOffsetOutOfRange, f.st.HighWatermark)}
	}
	f.st.LogStartOffset = max(f.st.LogStartOffset, off)
	return applyResult{base: f.st.LogStartOffset}
}

// logStart is the partition's log start offset.
func (f *fsm) logStart() int64 {
	f.mu.Lock()
	st := f.st.LogStartOffset
	f.mu.Unlock()
	return max(st, f.store.LogStartOffset())
}

func (f *fsm) isBehind() bool { return f.behind.Load() }

// caughtUp clears the behind mark once the log holds everything the state
// describes (a seed was installed), and reports whether it did.
func (f *fsm) caughtUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.store.NextOffset() < f.st.HighWatermark || f.follows != nil && !f.follows() {
		return false
	}
	f.behind.Store(false)
	return true
}

func (f *fsm) highWatermark() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.HighWatermark
}

// producer returns a copy of a producer id's state, nil if unknown.
func (f *fsm) producer(pid int64) *ProducerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.Producers[pid].clone()
}

func (f *fsm) epochs() []EpochStart {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]EpochStart(nil), f.st.Epochs...)
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	st := f.st
	st.Epochs = append([]EpochStart(nil), f.st.Epochs...)
	st.Producers = make(map[int64]*ProducerState, len(f.st.Producers))
	for pid, ps := range f.st.Producers {
		st.Producers[pid] = ps.clone()
	}
	f.mu.Unlock()
	st.LogStartOffset = max(st.LogStartOffset, f.store.LogStartOffset())
	return snapshot(st), nil
}

// Restore replaces the state with a snapshot's. The high watermark only
// moves forward: a snapshot never holds less than what this replica
// applied, but keeping the max makes that local invariant explicit.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st fsmState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("restore partition state: %w", err)
	}
	for pid, ps := range st.Producers {
		if ps == nil { // "null" in the snapshot: nothing is known of it
			delete(st.Producers, pid)
		}
	}
	// A snapshot from a leader (InstallSnapshot) whose high watermark is
	// past this replica's log end describes data this log lacks: Raft
	// wants it when the batches the follower needs are gone (retention).
	// The store cannot take the entries after the snapshot either (they
	// do not follow its log), so the replica stops serving rather than
	// expose offsets it does not hold, and is seeded from a peer's
	// segments (seed.go), which clears the mark.
	// A store whose raft entries end before the snapshot (or that held
	// an uncommitted tail the snapshot overrules: restored cuts it) cannot
	// take the entries after it either, whatever its offsets: it is
	// seeded too.
	stale := f.restored != nil && f.restored()
	end := f.store.NextOffset()
	f.mu.Lock()
	st.HighWatermark = max(st.HighWatermark, f.st.HighWatermark)
	st.LogStartOffset = max(st.LogStartOffset, f.st.LogStartOffset)
	if f.st.Meter.Closed.End > st.Meter.Closed.End {
		st.Meter = f.st.Meter // like the high watermark: never back
	}
	behind := st.HighWatermark > end || stale
	if behind {
		f.behind.Store(true)
	}
	f.st = st
	f.noteMove()
	hw := st.HighWatermark
	f.mu.Unlock()
	if behind && f.logger != nil {
		f.logger.Warn("partition replica is behind the leader's log start; it serves nothing until it is seeded from a peer's segments",
			"high_watermark", hw, "log_end_offset", end, "log_start_offset", st.LogStartOffset)
	}
	if behind && f.onBehind != nil {
		f.onBehind()
	}
	if f.advanced != nil {
		f.advanced(hw)
	}
	return nil
}

type snapshot fsmState

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(fsmState(s)); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist partition state: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
