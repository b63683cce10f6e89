package raftlog_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// dataEntries returns n command entries from index from, each a batch of
// one record of size bytes.
func dataEntries(term, from uint64, n, size int) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		v := bytes.Repeat([]byte{byte('a' + i)}, size)
		out[i] = &raft.Log{Index: from + uint64(i), Term: term, Type: raft.LogCommand, Data: celltest.Batch(v)}
	}
	return out
}

// fromCache reports whether got is the entry stored as want, not a copy
// read back from the partition log: the cache hands out what it was given.
func fromCache(got, want *raft.Log) bool {
	return len(got.Data) > 0 && len(want.Data) > 0 && &got.Data[0] == &want.Data[0]
}

func getLog(t *testing.T, c *raftlog.Cache, index uint64) raft.Log {
	t.Helper()
	var got raft.Log
	if err := c.GetLog(index, &got); err != nil {
		t.Fatalf("GetLog(%d): %v", index, err)
	}
	return got
}

// TestCacheBoundsEntriesAndBytes: the cache serves the newest entries
// within both bounds and leaves the rest to the store, which gives the
// same contents.
func TestCacheBoundsEntriesAndBytes(t *testing.T) {
	s := openStore(t, t.TempDir(), newCommitter(t))
	in := dataEntries(1, 1, 10, 1000)
	size := int64(len(in[0].Data))
	c, err := raftlog.NewCache(s, 4, 3*size)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(in[:6]); err != nil {
		t.Fatal(err)
	}
	if n, b := c.Cached(); n != 3 || b != 3*size {
		t.Fatalf("after 6 entries of %d bytes with a 3-entry byte bound: %d entries, %d bytes cached", size, n, b)
	}
	for _, l := range in[6:] {
		if err := c.StoreLog(l); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range in {
		got := getLog(t, c, want.Index)
		if got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d: got index %d term %d, %d bytes", want.Index, got.Index, got.Term, len(got.Data))
		}
		if cached := fromCache(&got, want); cached != (i >= 7) {
			t.Fatalf("entry %d served from the cache: %v, want %v (the 3 newest)", want.Index, cached, i >= 7)
		}
	}

	// The entry bound: small entries, four of them at most.
	small := dataEntries(1, 11, 6, 10)
	if err := c.StoreLogs(small); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 4 {
		t.Fatalf("%d small entries cached, want the bound of 4", n)
	}
	for i, want := range small {
		if got := getLog(t, c, want.Index); fromCache(&got, want) != (i >= 2) {
			t.Fatalf("small entry %d: from the cache %v", want.Index, fromCache(&got, want))
		}
	}

	// The newest entry stays even when it alone is over the byte bound.
	big := dataEntries(1, 17, 1, 5000)
	if err := c.StoreLogs(big); err != nil {
		t.Fatal(err)
	}
	if n, b := c.Cached(); n != 1 || b != int64(len(big[0].Data)) {
		t.Fatalf("after an entry over the bound: %d entries, %d bytes", n, b)
	}
	if got := getLog(t, c, 17); !fromCache(&got, big[0]) {
		t.Fatal("the newest entry is not cached")
	}
}

// TestCacheTruncation: entries a conflict cut and replaced are never
// served from the cache, and a store that fails caches nothing.
func TestCacheTruncation(t *testing.T) {
	s := openStore(t, t.TempDir(), newCommitter(t))
	c, err := raftlog.NewCache(s, 8, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(dataEntries(1, 1, 5, 100)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 0 {
		t.Fatalf("%d entries cached after a truncation", n)
	}
	repl := dataEntries(2, 4, 1, 300)
	if err := c.StoreLogs(repl); err != nil {
		t.Fatal(err)
	}
	if got := getLog(t, c, 4); got.Term != 2 || !fromCache(&got, repl[0]) {
		t.Fatalf("entry 4 after the conflict: term %d, from the cache %v", got.Term, fromCache(&got, repl[0]))
	}
	var none raft.Log
	if err := c.GetLog(5, &none); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("the cut entry 5: %v", err)
	}
	gap := dataEntries(2, 9, 1, 10)
	if err := c.StoreLogs(gap); !errors.Is(err, raftlog.ErrGap) {
		t.Fatalf("an entry after a gap: %v, want ErrGap", err)
	}
	if err := c.GetLog(9, &none); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("the refused entry 9: %v", err)
	}
	// An entry that does not follow the cached ones starts the cache again.
	if err := c.DeleteRange(1, 0); err != nil {
		t.Fatal(err)
	}
	next := dataEntries(2, 5, 2, 10)
	if err := c.StoreLogs(next); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 2 {
		t.Fatalf("%d entries cached", n)
	}
	if _, err := raftlog.NewCache(s, 0, 1); err == nil {
		t.Fatal("a cache of no entries was accepted")
	}
}

// TestCacheFloor: entries up to the floor leave the cache at the next
// store, though both bounds would keep them, and are read from the store
// unchanged; entries above it stay cached.
func TestCacheFloor(t *testing.T) {
	s := openStore(t, t.TempDir(), newCommitter(t))
	in := dataEntries(1, 1, 10, 1000)
	c, err := raftlog.NewCache(s, 32, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	floor := uint64(0)
	c.SetFloor(func() uint64 { return floor })
	if err := c.StoreLogs(in[:6]); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 6 {
		t.Fatalf("floor 0: %d entries cached, want all 6", n)
	}
	floor = 7 // applied and held by every follower up to 7
	if err := c.StoreLogs(in[6:]); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 3 {
		t.Fatalf("floor 7 after storing 10 entries: %d entries cached, want 3 (8 to 10)", n)
	}
	for i, want := range in {
		got := getLog(t, c, want.Index)
		if cached := fromCache(&got, want); cached != (i >= 7) {
			t.Errorf("entry %d served from the cache: %t, want %t", want.Index, cached, i >= 7)
		}
		if !bytes.Equal(got.Data, want.Data) {
			t.Errorf("entry %d: data differs from what was stored", want.Index)
		}
	}
	floor = 100 // past everything: the cache empties at the next store
	c.SetFloor(nil)
	if err := c.StoreLogs(dataEntries(1, 11, 1, 1000)); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Cached(); n != 4 {
		t.Fatalf("floor removed: %d entries cached, want 4", n)
	}
}
