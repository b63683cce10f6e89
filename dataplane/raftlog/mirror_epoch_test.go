package raftlog_test

import (
	"errors"
	"math"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// TestPromoteEncoding: the promote entry carries the epoch base after the
// end offset; the older form without it decodes with base 0; anything
// else is refused.
func TestPromoteEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want raftlog.MirrorPromote
		bad  bool
	}{
		{"with a base", raftlog.EncodePromote(raftlog.MirrorPromote{End: 1 << 33, EpochBase: 71}), raftlog.MirrorPromote{End: 1 << 33, EpochBase: 71}, false},
		{"older form", raftlog.EncodeMirrorPromote(17), raftlog.MirrorPromote{End: 17}, false},
		{"negative base", raftlog.EncodePromote(raftlog.MirrorPromote{End: 3, EpochBase: -1}), raftlog.MirrorPromote{}, true},
		{"negative end", raftlog.EncodePromote(raftlog.MirrorPromote{End: -3, EpochBase: 1}), raftlog.MirrorPromote{}, true},
		{"truncated base", raftlog.EncodePromote(raftlog.MirrorPromote{End: 3, EpochBase: 1})[:11], raftlog.MirrorPromote{}, true},
		{"another kind", append(raftlog.EncodeLogStart(3), 0, 0, 0, 1), raftlog.MirrorPromote{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := raftlog.DecodePromote(tc.data)
			if tc.bad {
				if !errors.Is(err, raftlog.ErrBadControl) {
					t.Fatalf("decode %x: %+v, %v; want ErrBadControl", tc.data, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("decode %x: %+v, %v; want %+v", tc.data, got, err, tc.want)
			}
		})
	}
}

// TestStoreEpochBase: a data entry with an epoch base is stamped base +
// term, keeps its extensions for Raft, survives a reopen (recovery checks
// the last batch against base + term), and one whose epoch would not fit
// an int32 is refused.
func TestStoreEpochBase(t *testing.T) {
	dir := t.TempDir()
	c := newCommitter(t)
	s := openStore(t, dir, c)
	in := []*raft.Log{
		{Index: 1, Term: 2, Type: raft.LogConfiguration, Data: []byte("cfg")},
		{Index: 2, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte("before"))},
		{Index: 3, Term: 3, Type: raft.LogCommand, Data: celltest.Batch([]byte("after")), Extensions: raftlog.EpochExt(60)},
		{Index: 4, Term: 4, Type: raft.LogCommand, Data: celltest.Batch([]byte("new leader")), Extensions: raftlog.EpochExt(60)},
	}
	if err := s.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	check := func(s *raftlog.Store) {
		t.Helper()
		for i, want := range []int32{2, 63, 64} {
			h, _, err := s.Log().ReadBatch(int64(i), nil)
			if err != nil || h.LeaderEpoch != want {
				t.Fatalf("batch at %d: epoch %d, %v; want %d", i, h.LeaderEpoch, err, want)
			}
			var l raft.Log
			if err := s.GetLog(uint64(i+2), &l); err != nil {
				t.Fatal(err)
			}
			if l.Term != in[i+1].Term || string(l.Extensions) != string(in[i+1].Extensions) {
				t.Fatalf("entry %d: term %d, extensions %q; want %d, %q", i+2, l.Term, l.Extensions, in[i+1].Term, in[i+1].Extensions)
			}
		}
	}
	check(s)
	s.Close()
	s = openStore(t, dir, c)
	check(s)
	over := &raft.Log{Index: 5, Term: 10, Type: raft.LogCommand, Data: celltest.Batch([]byte("x")), Extensions: raftlog.EpochExt(math.MaxInt32 - 9)}
	if err := s.StoreLogs([]*raft.Log{over}); !errors.Is(err, raftlog.ErrTermTooLarge) {
		t.Fatalf("store an epoch past int32: %v, want ErrTermTooLarge", err)
	}
	bad := &raft.Log{Index: 5, Term: 10, Type: raft.LogCommand, Data: celltest.Batch([]byte("x")), Extensions: raftlog.EpochExt(1)[:len(raftlog.EpochExtension)+2]}
	if err := s.StoreLogs([]*raft.Log{bad}); err == nil {
		t.Fatal("stored an entry with a malformed epoch extension")
	}
	if got := s.Log().NextOffset(); got != 3 {
		t.Fatalf("log ends at %d after the refusals, want 3", got)
	}
}
