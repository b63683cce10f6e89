package raftlog_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// TestControlEntryTakesNoOffset: a control entry (a LogCommand whose
// extensions carry raftlog.ControlExtension) is kept in the entries file
// with its data, takes no Kafka offset, and survives a reopen.
func TestControlEntryTakesNoOffset(t *testing.T) {
	dir, c, s, in := storedScript(t, 2)
	ctl := &raft.Log{Index: 6, Term: 2, Type: raft.LogCommand, Data: raftlog.EncodeLogStart(2), Extensions: raftlog.ControlExtension}
	data := &raft.Log{Index: 7, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte("d"))}
	if err := s.StoreLogs([]*raft.Log{ctl, data}); err != nil {
		t.Fatal(err)
	}
	next := s.Log().NextOffset()
	check := func(s *raftlog.Store) {
		t.Helper()
		var got raft.Log
		if err := s.GetLog(6, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, ctl.Data) || !raftlog.IsControl(got.Type, got.Extensions) {
			t.Fatalf("control entry read back as %+v", got)
		}
		if off, err := raftlog.DecodeLogStart(got.Data); err != nil || off != 2 {
			t.Fatalf("decode: %d %v", off, err)
		}
		if o, ok := s.KafkaOffsetThrough(6); !ok || o != 3 {
			t.Fatalf("kafka offset through the control entry %d %v, want 3 (the data before it)", o, ok)
		}
		if s.Log().NextOffset() != next || next != 4 {
			t.Fatalf("log end %d, want 4: the control entry takes no offset", s.Log().NextOffset())
		}
	}
	check(s)
	s.Close()
	check(openStore(t, dir, c))
	_ = in
	if _, err := raftlog.DecodeLogStart([]byte{9}); !errors.Is(err, raftlog.ErrBadControl) {
		t.Fatalf("bad control data: %v", err)
	}
}

// TestCompactEntries: records of entries whose batches retention deleted
// go from the entries file once Raft's snapshot covers them; entries after
// the snapshot index, or with data at or above the log start, stay, and a
// reopened store agrees.
func TestCompactEntries(t *testing.T) {
	dir := t.TempDir()
	c := newCommitter(t)
	s, err := raftlog.Open(t.Context(), raftlog.Config{Dir: dir, Committer: c, Log: log.Config{SegmentBytes: 200}})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	logs = append(logs, &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")})
	for i := uint64(2); i <= 41; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: celltest.Batch([]byte("x"))})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	sizeBefore := fileSize(t, filepath.Join(dir, "raft.entries"))
	// Nothing is below the log start yet.
	if n, err := s.CompactEntries(41); err != nil || n != 0 {
		t.Fatalf("compact with nothing deleted: %d %v", n, err)
	}
	if err := s.Log().DeleteHead(30); err != nil {
		t.Fatal(err)
	}
	// The snapshot covers up to index 21 (Kafka offsets 0–19): only the
	// configuration and entries 2–21 may go.
	n, err := s.CompactEntries(21)
	if err != nil || n != 21 {
		t.Fatalf("compact: dropped %d %v, want 21", n, err)
	}
	check := func(s *raftlog.Store, last uint64) {
		t.Helper()
		if f, _ := s.FirstIndex(); f != 22 {
			t.Fatalf("first index %d, want 22", f)
		}
		if l, _ := s.LastIndex(); l != last {
			t.Fatalf("last index %d", l)
		}
		var got raft.Log
		if err := s.GetLog(21, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("get a dropped entry: %v", err)
		}
		if err := s.GetLog(35, &got); err != nil || got.Index != 35 {
			t.Fatalf("get a kept entry: %+v %v", got, err)
		}
	}
	check(s, 41)
	if after := fileSize(t, filepath.Join(dir, "raft.entries")); after >= sizeBefore {
		t.Fatalf("entries file %d bytes, was %d", after, sizeBefore)
	}
	// Still appendable, and a reopen finds the same.
	if err := s.StoreLogs([]*raft.Log{{Index: 42, Term: 1, Type: raft.LogCommand, Data: celltest.Batch([]byte("y"))}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openStore(t, dir, c)
	check(s2, 42)
	if n := s2.Log().NextOffset(); n != 41 {
		t.Fatalf("log end %d after reopen", n)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
