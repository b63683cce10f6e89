package raftlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

func openCompactedStore(t *testing.T, dir string, c *raftlog.Committer) *raftlog.Store {
	t.Helper()
	s, err := raftlog.Open(context.Background(), raftlog.Config{Dir: dir, Committer: c, Log: log.Config{Compacted: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func rollEntry(index, term uint64) *raft.Log {
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: raftlog.EncodeRoll(), Extensions: raftlog.ControlExtension}
}

func dataEntry(index, term uint64, v string) *raft.Log {
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: celltest.Batch([]byte(v))}
}

// TestReplicatedRolls: a ControlRoll entry rolls the partition log where
// it lies, in one StoreLogs call with the entries around it or alone; it
// takes no Kafka offset; a conflict that removes it (or cuts back into the
// segment before it while it stays) leaves the boundaries the remaining
// entries say; reopening keeps them.
func TestReplicatedRolls(t *testing.T) {
	dir := t.TempDir()
	c := newCommitter(t)
	s := openCompactedStore(t, dir, c)
	segs := func(want ...int64) {
		t.Helper()
		if got := s.Log().Segments(); !slices.Equal(got, want) {
			t.Fatalf("segments %v, want %v", got, want)
		}
	}
	if err := s.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")},
		dataEntry(2, 1, "a"), dataEntry(3, 1, "b"), rollEntry(4, 1), dataEntry(5, 1, "c"),
	}); err != nil {
		t.Fatal(err)
	}
	segs(0, 2)
	if err := s.StoreLogs([]*raft.Log{rollEntry(6, 1)}); err != nil {
		t.Fatal(err)
	}
	segs(0, 2, 3)
	// The conflict removes the roll entry with nothing after it: the empty
	// segment goes.
	if err := s.DeleteRange(6, 6); err != nil {
		t.Fatal(err)
	}
	segs(0, 2)
	// Removing the data after a roll entry that stays keeps its boundary.
	if err := s.DeleteRange(5, 5); err != nil {
		t.Fatal(err)
	}
	segs(0, 2)
	if err := s.StoreLogs([]*raft.Log{dataEntry(5, 2, "d"), rollEntry(6, 2), rollEntry(7, 2)}); err != nil {
		t.Fatal(err)
	}
	segs(0, 2, 3)
	var got raft.Log
	if err := s.GetLog(6, &got); err != nil || !slices.Equal(got.Data, raftlog.EncodeRoll()) {
		t.Fatalf("roll entry read back as %v, %v", got.Data, err)
	}
	if n := s.Log().NextOffset(); n != 3 {
		t.Fatalf("log end %d, want 3: rolls take no offsets", n)
	}
	// The second roll was a no-op on an empty segment; removing it keeps
	// the first one's boundary.
	if err := s.DeleteRange(7, 7); err != nil {
		t.Fatal(err)
	}
	segs(0, 2, 3)
	s.Close()
	s = openCompactedStore(t, dir, c)
	segs(0, 2, 3)
}

// TestCleanEntryRoundTrip: a ControlClean entry decodes to what was
// encoded, and malformed data is refused.
func TestCleanEntryRoundTrip(t *testing.T) {
	for _, c := range []raftlog.Clean{
		{UpTo: 1234, Now: 1_700_000_000_000, DeleteRetentionMs: 86400000, MinCompactionLag: 5},
		{UpTo: 1234, Now: 1_700_000_000_000, Bases: []int64{17, 400, 1234}},
	} {
		got, err := raftlog.DecodeClean(raftlog.EncodeClean(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip: %+v, %v", got, err)
		}
	}
	for _, bad := range [][]byte{nil, {raftlog.ControlClean}, raftlog.EncodeLogStart(5), raftlog.EncodeClean(raftlog.Clean{UpTo: -1}),
		raftlog.EncodeClean(raftlog.Clean{UpTo: 10, Bases: []int64{5, 5}}), raftlog.EncodeClean(raftlog.Clean{UpTo: 10, Bases: []int64{5, 11}}),
		append(raftlog.EncodeClean(raftlog.Clean{UpTo: 10}), 0)} {
		if _, err := raftlog.DecodeClean(bad); err == nil {
			t.Errorf("DecodeClean(%v) accepted", bad)
		}
	}
}

// TestRollRedoneAfterCrash: a crash after a roll entry's record was
// stored but before the log rolled (here: the new segment's file is
// gone) is repaired at Open, so the next batch starts a segment where the
// other replicas' does.
func TestRollRedoneAfterCrash(t *testing.T) {
	dir := t.TempDir()
	c := newCommitter(t)
	s := openCompactedStore(t, dir, c)
	if err := s.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")},
		dataEntry(2, 1, "a"), dataEntry(3, 1, "b"), rollEntry(4, 1), {Index: 5, Term: 1, Type: raft.LogNoop},
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.Log().Segments(); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("segments %v", got)
	}
	s.Close()
	for _, suf := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(filepath.Join(dir, "log", fmt.Sprintf("%020d%s", 2, suf))); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	s = openCompactedStore(t, dir, c)
	if got := s.Log().Segments(); !slices.Equal(got, []int64{0, 2}) {
		t.Fatalf("segments after the lost roll %v, want [0 2]", got)
	}
	if err := s.StoreLogs([]*raft.Log{dataEntry(6, 1, "c")}); err != nil {
		t.Fatal(err)
	}
	if got := s.Log().Segments(); !slices.Equal(got, []int64{0, 2}) || s.Log().NextOffset() != 3 {
		t.Fatalf("segments %v, next %d", got, s.Log().NextOffset())
	}
}
