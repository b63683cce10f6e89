package partition

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"testing"

	"github.com/hashicorp/raft"
)

type startAt int64

func (s startAt) LogStartOffset() int64 { return int64(s) }
func (s startAt) NextOffset() int64     { return math.MaxInt64 }

// memSink is a raft.SnapshotSink into memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "fuzz" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// persist snapshots f and persists the snapshot into memory, as Raft does
// before it writes a snapshot to disk.
func persist(t testing.TB, f *fsm) *memSink {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return &sink
}

// restoreCopy persists f and restores the bytes into a fresh state machine,
// as a replica started from f's snapshot would hold them.
func restoreCopy(t testing.TB, f *fsm) *fsm {
	t.Helper()
	g := &fsm{store: startAt(0)}
	if err := g.Restore(persist(t, f)); err != nil {
		t.Fatal(err)
	}
	return g
}

// idempotentBatch is a one-record batch of producer pid at epoch and
// sequence seq, base offset base, as a leader appends it.
func idempotentBatch(base int64, leaderEpoch int32, pid int64, epoch int16, seq int32) []byte {
	rec := []byte{0, 0, 0, 1, 2, 'v', 0} // attributes, ts delta, offset delta, null key, value "v", no headers
	b := make([]byte, 61, 61+1+len(rec))
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], uint32(leaderEpoch))
	b[16] = 2
	be.PutUint64(b[27:], 1)
	be.PutUint64(b[35:], 1)
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], 1)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// FuzzRestore feeds arbitrary bytes to the partition FSM as a snapshot (a
// peer's InstallSnapshot, or the snapshot file on disk) and then drives the
// restored state as a replica would.
//
// Invariants:
//   - Restore never panics; it accepts or returns an error;
//   - the high watermark never goes back across a restore;
//   - a restored state takes further entries (new producers, eviction of
//     remembered ones, sequence checks) without panicking;
//   - an accepted state persists and restores to an equal state (the
//     persisted bytes are a fixed point).
func FuzzRestore(f *testing.F) {
	seed := &fsm{store: startAt(0)}
	for i := int64(0); i < 4; i++ {
		seed.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: idempotentBatch(i, 1, i%2+7, 0, int32(i/2))})
	}
	var sink memSink
	snap, _ := seed.Snapshot()
	if err := snap.Persist(&sink); err != nil {
		f.Fatal(err)
	}
	f.Add(sink.Bytes())
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"high_watermark":-5,"epochs":[{"epoch":3,"start_offset":9},{"epoch":1,"start_offset":2}]}`))
	f.Add([]byte(`{"high_watermark":3,"producers":{"7":null,"8":{"epoch":0,"batches":[]}}}`))
	f.Add([]byte(`{"producers":{"7":{"epoch":-1,"batches":[{"first_seq":5,"last_seq":2,"base_offset":-1}]}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"high_watermark":1e30}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		defer SetMaxProducers(2)()
		m := &fsm{store: startAt(0)}
		m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: idempotentBatch(0, 1, 1, 0, 0)})
		before := m.highWatermark()
		if err := m.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
			return
		}
		if hw := m.highWatermark(); hw < before {
			t.Fatalf("high watermark went back from %d to %d", before, hw)
		}
		sink := persist(t, m)
		again := &fsm{store: startAt(0)}
		if err := again.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatalf("restore of a persisted accepted state: %v", err)
		}
		var sink2 memSink
		snap2, _ := again.Snapshot()
		if err := snap2.Persist(&sink2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.Bytes(), sink2.Bytes()) {
			t.Fatalf("persist and restore changed the state:\n%s\n%s", sink.Bytes(), sink2.Bytes())
		}
		hw := m.highWatermark()
		for pid := int64(1); pid <= 9; pid++ {
			_, _, _ = m.producer(pid).check(pid, 0, 0, 0)
			m.Apply(&raft.Log{Index: uint64(pid + 1), Type: raft.LogCommand, Data: idempotentBatch(hw, 2, pid, 0, 0)})
			hw++
		}
	})
}
