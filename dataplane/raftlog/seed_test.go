package raftlog_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// sourceStore stores n data entries of term 2 from index 1 (Kafka offsets
// 0..n-1) in a store with small segments and returns it.
func sourceStore(t *testing.T, n int) *raftlog.Store {
	t.Helper()
	s, err := raftlog.Open(context.Background(), raftlog.Config{Dir: t.TempDir(), Committer: newCommitter(t), Log: log.Config{SegmentBytes: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var in []*raft.Log
	for i := range n {
		in = append(in, &raft.Log{Index: uint64(i + 1), Term: 2, Type: raft.LogCommand, Data: celltest.Batch(bytes.Repeat([]byte{'v'}, 100))})
	}
	if err := s.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	return s
}

// copySeed copies src's segment files holding [from, to) into dst's seed
// directory, as a seeding replica does, and returns the copy's start.
func copySeed(t *testing.T, src, dst *raftlog.Store, from, to int64) int64 {
	t.Helper()
	start, segs, err := src.Log().SeedSegments(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst.SeedDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sg := range segs {
		buf := make([]byte, sg.Size)
		if n, err := src.Log().ReadSegment(sg.Base, 0, sg.Size, buf); err != nil || int64(n) != sg.Size {
			t.Fatalf("read segment %d: %d of %d bytes, %v", sg.Base, n, sg.Size, err)
		}
		if err := os.WriteFile(filepath.Join(dst.SeedDir(), log.SegmentFileName(sg.Base)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return start
}

// TestInstallSeed: a store given a copy of another's segments from offset
// 20 to 40 (after Raft index 40) holds exactly those offsets, refuses
// nothing after index 40 and everything else, serves the same batches and
// still does after a reopen.
func TestInstallSeed(t *testing.T) {
	src := sourceStore(t, 50)
	dir := t.TempDir()
	c := newCommitter(t)
	dst := openStore(t, dir, c)
	if err := dst.StoreLogs(script(1, 1)); err != nil { // an old, shorter log
		t.Fatal(err)
	}
	start := copySeed(t, src, dst, 20, 40)
	plan := raftlog.SeedPlan{Index: 40, Term: 2, Offset: 40, LogStart: start}
	if err := dst.InstallSeed(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	check := func(s *raftlog.Store) {
		t.Helper()
		if s.Log().LogStartOffset() != 20 || s.Log().NextOffset() != 40 {
			t.Fatalf("seeded log holds [%d, %d), want [20, 40)", s.Log().LogStartOffset(), s.Log().NextOffset())
		}
		for off := int64(20); off < 40; off++ {
			_, a, err := s.Log().ReadBatch(off, nil)
			_, b, err2 := src.Log().ReadBatch(off, nil)
			if err != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Fatalf("batch %d differs: %v %v", off, err, err2)
			}
		}
		if s.SeededAfter() != 40 || !s.AwaitingConfiguration() {
			t.Fatalf("seeded after %d, awaiting configuration %v", s.SeededAfter(), s.AwaitingConfiguration())
		}
		if last, _ := s.LastIndex(); last != 0 {
			t.Fatalf("last index %d before any entry after the seed", last)
		}
	}
	check(dst)
	var e raft.Log
	if err := dst.GetLog(40, &e); err == nil {
		t.Fatal("the seeded store claims the snapshot's own entry")
	}
	if _, err := os.Stat(dst.SeedDir()); !os.IsNotExist(err) {
		t.Fatalf("seed directory still there: %v", err)
	}
	dst.Close()
	dst = openStore(t, dir, c)
	check(dst)
	if err := dst.StoreLogs([]*raft.Log{{Index: 42, Term: 2, Type: raft.LogNoop}}); err == nil {
		t.Fatal("stored an entry that does not follow the seed")
	}
	next := &raft.Log{Index: 41, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte("after"))}
	if err := dst.StoreLogs([]*raft.Log{next, {Index: 42, Term: 2, Type: raft.LogConfiguration, Data: []byte("cfg")}}); err != nil {
		t.Fatal(err)
	}
	if err := dst.GetLog(41, &e); err != nil || e.Term != 2 {
		t.Fatalf("entry after the seed: %+v %v", e, err)
	}
	if h, _, err := dst.Log().ReadBatch(40, nil); err != nil || h.BaseOffset != 40 {
		t.Fatalf("batch after the seed at %d: %v", h.BaseOffset, err)
	}
	if dst.AwaitingConfiguration() {
		t.Fatal("still awaiting a configuration after storing one")
	}
	dst.Close()
	if dst = openStore(t, dir, c); dst.Log().NextOffset() != 41 || dst.AwaitingConfiguration() {
		t.Fatalf("reopened: log ends at %d, awaiting configuration %v", dst.Log().NextOffset(), dst.AwaitingConfiguration())
	}
}

// TestInstallSeedFinishedByOpen: an install a crash interrupted, at each
// step, is finished by the next Open: the plan recorded, then the old log
// moved away, then the copy moved in.
func TestInstallSeedFinishedByOpen(t *testing.T) {
	src := sourceStore(t, 50)
	for _, step := range []string{"plan written", "old log moved", "copy moved in"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			c := newCommitter(t)
			dst := openStore(t, dir, c)
			if err := dst.StoreLogs(script(1, 1)); err != nil {
				t.Fatal(err)
			}
			start := copySeed(t, src, dst, 20, 40)
			dst.Close()
			plan := []byte("v1 40 2 40 " + itoa(start) + "\n")
			if err := os.WriteFile(filepath.Join(dir, "seed.install"), plan, 0o644); err != nil {
				t.Fatal(err)
			}
			switch step {
			case "old log moved":
				if err := os.Rename(filepath.Join(dir, "log"), filepath.Join(dir, "log.replaced")); err != nil {
					t.Fatal(err)
				}
			case "copy moved in":
				if err := log.SwapDirs(dst.SeedDir(), filepath.Join(dir, "log"), filepath.Join(dir, "log.replaced")); err != nil {
					t.Fatal(err)
				}
			}
			s := openStore(t, dir, c)
			if s.Log().NextOffset() != 40 || s.SeededAfter() != 40 {
				t.Fatalf("after %s: log ends at %d, seeded after %d", step, s.Log().NextOffset(), s.SeededAfter())
			}
			if s.Log().LogStartOffset() != start {
				t.Fatalf("after %s: log start %d, want %d", step, s.Log().LogStartOffset(), start)
			}
			for _, n := range []string{"seed.install", "seed", "log.replaced"} {
				if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
					t.Fatalf("after %s: %s left behind (%v)", step, n, err)
				}
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
