package partition

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
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
	// LogStartOffset is the partition's log start offset as of the
	// snapshot; retention moves it.
	LogStartOffset int64 `json:"log_start_offset"`
	// Producers is the idempotent-producer state by producer id: what the
	// leader checks sequences against, rebuilt by every replica from the
	// entries it applies.
	Producers map[int64]*ProducerState `json:"producers,omitempty"`
}

// fsm applies committed entries. Raft's FSM goroutine calls Apply and
// Snapshot; readers call state.
type fsm struct {
	store interface{ LogStartOffset() int64 }
	// advanced, if set, is called (outside mu) with the new high
	// watermark after each entry that moved it.
	advanced func(hw int64)

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
	st.LogStartOffset = f.store.LogStartOffset()
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
	f.mu.Lock()
	st.HighWatermark = max(st.HighWatermark, f.st.HighWatermark)
	f.st = st
	hw := st.HighWatermark
	f.mu.Unlock()
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
