package raftlog

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Mirror entries (MirrorExtension) carry another cell's record batches
// with their own base offsets and leader epochs. The store keeps each at
// its base offset, which may leave a gap after the previous batch (a
// compacted or trimmed source), and records it with at = its base offset
// and count = its offset span. A mirror entry that MirrorApplies refuses
// (a re-pull after a leader change, or one whose predecessor was lost)
// does not enter the partition log: its record keeps the batch in the
// entries file with count 0, so that GetLog gives Raft the same entry
// back. Both depend only on the entries before it, so every replica
// decides the same.

// isMirror reports whether e is a mirror entry.
func (e *entry) isMirror() bool { return IsMirror(e.typ, e.ext) }

// inLog reports whether e's batch is in the partition log: a data entry,
// but not a mirror entry that was a no-op.
func (e *entry) inLog() bool { return e.isData() && e.data == nil }

// mirrorEntry fills e for mirror entry l stored after Kafka offset kafka
// and returns the batch to append, or a zero Batch for a no-op entry.
func (s *Store) mirrorEntry(e *entry, l *raft.Log, kafka int64) (log.Batch, error) {
	h, err := log.ParseHeader(l.Data)
	if err != nil {
		return log.Batch{}, fmt.Errorf("store raft entry %d: %w: %w", l.Index, ErrNotBatch, err)
	}
	prev, _ := MirrorPrev(l.Extensions)
	if !MirrorApplies(h.BaseOffset, prev, kafka) {
		e.data = l.Data
		return log.Batch{}, nil
	}
	e.at, e.count = h.BaseOffset, int64(h.LastOffsetDelta)+1
	return log.Batch{Data: l.Data, Keep: true}, nil
}

// mirrorData checks that the batch read for mirror entry e is its own and
// gives it to out.
func mirrorData(index uint64, e entry, h log.Header, b []byte, out *raft.Log) error {
	if h.BaseOffset != e.at || int64(h.LastOffsetDelta)+1 != e.count {
		return fmt.Errorf("get raft entry %d: %w: mirrored batch at %d has offsets %d–%d, want %d offsets",
			index, ErrInconsistent, e.at, h.BaseOffset, h.LastOffset(), e.count)
	}
	out.Data = b
	return nil
}
