package raftlog_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// sourceBatch is a batch as another cell's log holds it: at base, written
// in that cell's leader epoch.
func sourceBatch(base int64, epoch int32, vals ...string) []byte {
	var vs [][]byte
	for _, v := range vals {
		vs = append(vs, []byte(v))
	}
	b := celltest.Batch(vs...)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	return b
}

// TestStoreMirrorEntries: mirror entries keep their batches' offsets and
// epochs (gaps included), a re-pulled one is a no-op that Raft still gets
// back whole, and all of it survives a reopen and a conflict cut.
func TestStoreMirrorEntries(t *testing.T) {
	dir := t.TempDir()
	c := newCommitter(t)
	s := openStore(t, dir, c)
	m := func(i uint64, b []byte) *raft.Log {
		return &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: b, Extensions: raftlog.MirrorExt(0)}
	}
	b1 := sourceBatch(100, 9, "a", "b") // 100–101: the source's log starts at 100
	b2 := sourceBatch(105, 9, "c")      // a compaction gap 102–104
	dup := sourceBatch(100, 9, "a", "b")
	b3 := sourceBatch(106, 11, "d")
	in := []*raft.Log{
		{Index: 1, Term: 2, Type: raft.LogConfiguration, Data: []byte("cfg")},
		m(2, append([]byte(nil), b1...)),
		m(3, append([]byte(nil), b2...)),
		m(4, append([]byte(nil), dup...)),
		m(5, append([]byte(nil), b3...)),
	}
	if err := s.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	check := func(s *raftlog.Store) {
		t.Helper()
		if got := s.Log().NextOffset(); got != 107 {
			t.Fatalf("log ends at %d, want 107", got)
		}
		for i, want := range [][]byte{b1, b2, dup, b3} {
			var l raft.Log
			if err := s.GetLog(uint64(i+2), &l); err != nil {
				t.Fatalf("get %d: %v", i+2, err)
			}
			if !bytes.Equal(l.Data, want) || !raftlog.IsMirror(l.Type, l.Extensions) {
				t.Fatalf("entry %d: data or extensions differ", i+2)
			}
		}
		for _, want := range [][]byte{b1, b2, b3} {
			base := int64(binary.BigEndian.Uint64(want))
			_, got, err := s.Log().ReadBatch(base, nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("log batch at %d: %v; bytes equal %v", base, err, bytes.Equal(got, want))
			}
		}
		if off, ok := s.KafkaOffsetAt(4); !ok || off != 106 {
			t.Fatalf("Kafka offset after the no-op entry: %d %v, want 106", off, ok)
		}
	}
	check(s)
	s.Close()
	s = openStore(t, dir, c)
	check(s)
	// A conflict cut at the entry after a gap leaves the log at the end
	// of the entry before it, and the next batch may follow at any offset.
	if err := s.DeleteRange(3, 5); err != nil {
		t.Fatal(err)
	}
	if got := s.Log().NextOffset(); got != 102 {
		t.Fatalf("after the cut the log ends at %d, want 102", got)
	}
	if err := s.StoreLogs([]*raft.Log{m(3, sourceBatch(103, 9, "e"))}); err != nil {
		t.Fatal(err)
	}
	if got := s.Log().NextOffset(); got != 104 {
		t.Fatalf("log ends at %d, want 104", got)
	}
	// An entry that follows source offset 108 when the store ends at 104
	// (its predecessor was lost with a leader) would leave a hole: a
	// no-op. One that follows 104 lands past a gap.
	after := func(i uint64, prev int64, b []byte) *raft.Log {
		return &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: b, Extensions: raftlog.MirrorExt(prev)}
	}
	if err := s.StoreLogs([]*raft.Log{after(4, 108, sourceBatch(110, 9, "f")), after(5, 104, sourceBatch(110, 9, "f"))}); err != nil {
		t.Fatal(err)
	}
	if off, ok := s.KafkaOffsetAt(4); !ok || off != 104 {
		t.Fatalf("Kafka offset after the entry that would leave a hole: %d %v, want 104", off, ok)
	}
	if got := s.Log().NextOffset(); got != 111 {
		t.Fatalf("log ends at %d, want 111", got)
	}
}
