package raftlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

func openStore(t *testing.T, dir string, c *raftlog.Committer) *raftlog.Store {
	t.Helper()
	s, err := raftlog.Open(context.Background(), raftlog.Config{Dir: dir, Committer: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newCommitter(t *testing.T) *raftlog.Committer {
	c := raftlog.NewCommitter(log.SyncFiles)
	t.Cleanup(c.Close)
	return c
}

// storedScript opens a store on a fresh directory and stores script(term, 1)
// in it; it returns the directory, the committer, the store and the script.
func storedScript(t *testing.T, term uint64) (string, *raftlog.Committer, *raftlog.Store, []*raft.Log) {
	t.Helper()
	dir := t.TempDir()
	c := newCommitter(t)
	s := openStore(t, dir, c)
	in := script(term, 1)
	if err := s.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	return dir, c, s, in
}

// script is a mixed sequence: configuration, no-op, data, barrier, data.
func script(term uint64, from uint64) []*raft.Log {
	return []*raft.Log{
		{Index: from, Term: term, Type: raft.LogConfiguration, Data: []byte("cfg")},
		{Index: from + 1, Term: term, Type: raft.LogNoop},
		{Index: from + 2, Term: term, Type: raft.LogCommand, Data: celltest.Batch([]byte("a"), []byte("b"))},
		{Index: from + 3, Term: term, Type: raft.LogBarrier, Extensions: []byte("x")},
		{Index: from + 4, Term: term, Type: raft.LogCommand, Data: celltest.Batch([]byte("c"))},
	}
}

func TestStoreOffsetsAndGetLog(t *testing.T) {
	dir, c, s, in := storedScript(t, 3)
	check := func(s *raftlog.Store) {
		t.Helper()
		if f, _ := s.FirstIndex(); f != 1 {
			t.Fatalf("first index %d", f)
		}
		if l, _ := s.LastIndex(); l != 5 {
			t.Fatalf("last index %d", l)
		}
		if n := s.Log().NextOffset(); n != 3 {
			t.Fatalf("kafka log end %d, want 3: only data entries take offsets", n)
		}
		wantBase := map[uint64]int64{3: 0, 5: 2}
		for _, want := range in {
			var got raft.Log
			if err := s.GetLog(want.Index, &got); err != nil {
				t.Fatal(err)
			}
			if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
				!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) {
				t.Fatalf("entry %d: got %+v want %+v", want.Index, got, want)
			}
			if got.Type == raft.LogCommand {
				h, err := log.ParseHeader(got.Data)
				if err != nil {
					t.Fatal(err)
				}
				if h.BaseOffset != wantBase[got.Index] || h.LeaderEpoch != 3 {
					t.Fatalf("entry %d: base %d epoch %d", got.Index, h.BaseOffset, h.LeaderEpoch)
				}
			}
		}
		var none raft.Log
		if err := s.GetLog(6, &none); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog past end: %v", err)
		}
	}
	check(s)
	s.Close()
	check(openStore(t, dir, c))
}

func TestStoreTailTruncateAndCompaction(t *testing.T) {
	dir, c, s, _ := storedScript(t, 1)
	// Compaction of a prefix keeps the data.
	if err := s.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FirstIndex(); f != 1 {
		t.Fatalf("prefix delete changed first index to %d", f)
	}
	// A conflict at index 4 cuts entries 4–5 and Kafka offset 2.
	if err := s.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.LastIndex(); l != 3 {
		t.Fatalf("last index %d", l)
	}
	if n := s.Log().NextOffset(); n != 2 {
		t.Fatalf("kafka end %d", n)
	}
	// The new term's entries take the freed offsets.
	next := []*raft.Log{{Index: 4, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte("z"))}}
	if err := s.StoreLogs(next); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 9, Term: 2, Type: raft.LogNoop}}); !errors.Is(err, raftlog.ErrGap) {
		t.Fatalf("gap: %v", err)
	}
	s.Close()
	s = openStore(t, dir, c)
	var got raft.Log
	if err := s.GetLog(4, &got); err != nil {
		t.Fatal(err)
	}
	recs, err := celltest.Records(got.Data)
	if err != nil || len(recs) != 1 || recs[0].Offset != 2 || recs[0].LeaderEpoch != 2 || string(recs[0].Value) != "z" {
		t.Fatalf("records %+v %v", recs, err)
	}
}

// TestStoreRecovery covers damage to either file's tail. A lost record
// whose batch survived is rebuilt from the batch; a lost batch takes its
// record with it.
func TestStoreRecovery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		harm      func(t *testing.T, dir string)
		last      uint64
		kafkaNext int64
	}{
		{"torn entries record", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "raft.entries")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()-3); err != nil {
				t.Fatal(err)
			}
		}, 5, 3},
		{"torn batch", func(t *testing.T, dir string) {
			segs, _ := filepath.Glob(filepath.Join(dir, "log", "*.log"))
			fi, err := os.Stat(segs[len(segs)-1])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(segs[len(segs)-1], fi.Size()-5); err != nil {
				t.Fatal(err)
			}
		}, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c, s, in := storedScript(t, 1)
			s.Close()
			tc.harm(t, dir)
			s = openStore(t, dir, c)
			if l, _ := s.LastIndex(); l != tc.last {
				t.Fatalf("last index %d, want %d", l, tc.last)
			}
			if n := s.Log().NextOffset(); n != tc.kafkaNext {
				t.Fatalf("kafka end %d, want %d", n, tc.kafkaNext)
			}
			for _, want := range in[:tc.last] {
				var got raft.Log
				if err := s.GetLog(want.Index, &got); err != nil {
					t.Fatal(err)
				}
				if got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Extensions, want.Extensions) {
					t.Fatalf("entry %d after recovery: %+v, want %+v", want.Index, got, want)
				}
			}
			if err := s.StoreLogs([]*raft.Log{{Index: tc.last + 1, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte("d"))}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A call of plain command entries flushes the partition log only; its
// records may be lost to a power cut and are rebuilt from the batches. A
// call with any other entry flushes its records before its batches, so
// everything before the last such entry keeps its record.
func TestStorePlainCallsFlushTheLogOnly(t *testing.T) {
	dir, c, s, in := storedScript(t, 1)
	_, mixed := s.Durable()
	if fi, err := os.Stat(filepath.Join(dir, "raft.entries")); err != nil || fi.Size() != mixed {
		t.Fatalf("after a mixed call %d bytes of the entries file are durable, want all of it (%v, %v)", mixed, fi.Size(), err)
	}
	flushes := c.Stats().EntriesFlushes
	for i := uint64(6); i <= 25; i++ {
		l := &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: celltest.Batch([]byte{byte(i)}, []byte("v"))}
		if err := s.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
		in = append(in, l)
	}
	if got := c.Stats().EntriesFlushes; got != flushes {
		t.Fatalf("20 plain calls flushed the entries file %d times, want 0", got-flushes)
	}
	kafka, entries := s.Durable()
	if kafka != s.Log().NextOffset() || entries != mixed {
		t.Fatalf("durable kafka %d (log end %d), entries %d (want %d)", kafka, s.Log().NextOffset(), entries, mixed)
	}
	// A power cut: the entries file keeps only its flushed prefix and part
	// of a record.
	s.Close()
	if err := os.Truncate(filepath.Join(dir, "raft.entries"), entries+7); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, c)
	if l, _ := s.LastIndex(); l != 25 {
		t.Fatalf("last index %d after the cut, want 25", l)
	}
	for _, want := range in {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Term != want.Term || got.Type != want.Type {
			t.Fatalf("entry %d: term %d type %v, want %d %v", want.Index, got.Term, got.Type, want.Term, want.Type)
		}
		if got.Type == raft.LogCommand {
			recs, err := celltest.Records(got.Data)
			wrecs, _ := celltest.Records(want.Data)
			if err != nil || len(recs) != len(wrecs) || !bytes.Equal(recs[0].Value, wrecs[0].Value) || recs[0].LeaderEpoch != int32(want.Term) {
				t.Fatalf("entry %d: records %+v %v, want %+v", want.Index, recs, err, wrecs)
			}
		}
	}
	// The rebuilt records are on disk: a second open needs no rebuild and
	// the store goes on.
	s.Close()
	s = openStore(t, dir, c)
	if err := s.StoreLogs([]*raft.Log{{Index: 26, Term: 3, Type: raft.LogNoop}}); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.LastIndex(); l != 26 {
		t.Fatalf("last index %d", l)
	}
}

func TestCommitterSharesRounds(t *testing.T) {
	c := newCommitter(t)
	var observed atomic.Int64
	var maxSync atomic.Int64
	c.SetRoundObserver(func(d time.Duration) {
		observed.Add(1)
		if int64(d) > maxSync.Load() {
			maxSync.Store(int64(d))
		}
	})
	const parts = 16
	stores := make([]*raftlog.Store, parts)
	for i := range stores {
		stores[i] = openStore(t, t.TempDir(), c)
	}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := uint64(1); j <= 20; j++ {
				if err := s.StoreLogs([]*raft.Log{{Index: j, Term: 1, Type: raft.LogCommand, Data: celltest.Batch([]byte{byte(i)})}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range stores {
		if d, n := s.Log().DurableOffset(), s.Log().NextOffset(); d != n || n != 20 {
			t.Fatalf("durable %d next %d", d, n)
		}
	}
	st := c.Stats()
	// The first entry of an empty store flushes its record, then its
	// batch: 21 syncs per store.
	if st.Stores != parts*21 {
		t.Fatalf("stores synced %d, want %d", st.Stores, parts*21)
	}
	if st.EntriesFlushes != parts {
		t.Fatalf("entries files flushed %d times, want %d", st.EntriesFlushes, parts)
	}
	// Every round was timed, and a round that synced files took time.
	if n := observed.Load(); n != st.Rounds || maxSync.Load() <= 0 {
		t.Fatalf("observer saw %d rounds (longest %v), want %d timed", n, time.Duration(maxSync.Load()), st.Rounds)
	}
	t.Logf("%d rounds for %d store syncs, longest %v", st.Rounds, st.Stores, time.Duration(maxSync.Load()))
}

// A command entry whose bytes are not a valid batch (here: a flipped CRC
// byte, or too short for a header) is refused with ErrNotBatch and leaves
// the store as it was: no Raft entry, no Kafka offset.
func TestStoreRefusesCorruptBatch(t *testing.T) {
	s := openStore(t, t.TempDir(), newCommitter(t))
	if err := s.StoreLogs(script(1, 1)[:3]); err != nil {
		t.Fatal(err)
	}
	bad := celltest.Batch([]byte("x"))
	bad[len(bad)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		data []byte
	}{{"crc mismatch", bad}, {"short", []byte("not a batch")}} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.StoreLogs([]*raft.Log{
				{Index: 4, Term: 1, Type: raft.LogNoop},
				{Index: 5, Term: 1, Type: raft.LogCommand, Data: tc.data},
			})
			if !errors.Is(err, raftlog.ErrNotBatch) {
				t.Fatalf("StoreLogs = %v, want ErrNotBatch", err)
			}
			if l, _ := s.LastIndex(); l != 3 {
				t.Fatalf("last index %d after a refused append, want 3", l)
			}
			if n := s.Log().NextOffset(); n != 2 {
				t.Fatalf("kafka log end %d after a refused append, want 2", n)
			}
		})
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: celltest.Batch([]byte("ok"))}}); err != nil {
		t.Fatalf("store after refusals: %v", err)
	}
}

// A batch marked as validated (the leader's own, which Replica.Produce
// checked whole before Raft took it) is stored without hashing it again;
// the same bytes unmarked (a follower's, from the network) are hashed and
// refused. The flipped byte stands for "the CRC was not computed": a
// marked batch is never really corrupt. Once forgotten, the mark is gone.
func TestStoreDoesNotHashCheckedBatchesAgain(t *testing.T) {
	s := openStore(t, t.TempDir(), newCommitter(t))
	if err := s.StoreLogs(script(1, 1)[:3]); err != nil {
		t.Fatal(err)
	}
	unhashed := func() []byte {
		b := celltest.Batch([]byte("x"))
		b[len(b)-1] ^= 0xff // the CRC no longer matches
		return b
	}
	follower := unhashed()
	if err := s.StoreLogs([]*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: follower}}); !errors.Is(err, raftlog.ErrNotBatch) {
		t.Fatalf("an unmarked batch with a bad CRC: %v, want ErrNotBatch", err)
	}
	leader := unhashed()
	forget := s.MarkChecked(leader)
	if err := s.StoreLogs([]*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: leader}}); err != nil {
		t.Fatalf("a marked batch was hashed again: %v", err)
	}
	forget()
	again := unhashed()
	s.MarkChecked(again)() // marked and forgotten before it is stored
	if err := s.StoreLogs([]*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: again}}); !errors.Is(err, raftlog.ErrNotBatch) {
		t.Fatalf("a forgotten mark still skipped the CRC: %v", err)
	}
}
