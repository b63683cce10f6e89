package raftlog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	termKey = []byte("CurrentTerm")
	voteKey = []byte("LastVoteCand")
)

func openStable(t *testing.T, dir string) *StableStore {
	t.Helper()
	s, err := OpenStable(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantTerm(t *testing.T, s *StableStore, want uint64) {
	t.Helper()
	if v, err := s.GetUint64(termKey); v != want || err != nil {
		t.Fatalf("term %d (%v), want %d", v, err, want)
	}
}

// TestStableStore: values survive a reopen whichever slot the last Set
// wrote, a missing key reads as zero, and the file keeps its two-slot
// size (so a Set changes no metadata).
func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir)
	wantTerm(t, s, 0)
	if err := s.Set(voteKey, []byte("b2")); err != nil {
		t.Fatal(err)
	}
	for term := uint64(1); term <= 5; term++ {
		if err := s.SetUint64(termKey, term); err != nil {
			t.Fatal(err)
		}
		r := openStable(t, dir)
		wantTerm(t, r, term)
		if v, _ := r.Get(voteKey); string(v) != "b2" {
			t.Fatalf("vote %q after term %d", v, term)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, stableName)); err != nil || fi.Size() != 2*stableSlot {
		t.Fatalf("stable file: %v, size %d, want %d", err, fi.Size(), 2*stableSlot)
	}
}

// TestStableStoreTornSlot: a Set torn by a crash (its slot fails its CRC)
// leaves the store as it was before that Set; with both slots torn the
// store refuses to open rather than forget a vote.
func TestStableStoreTornSlot(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir)
	for term := uint64(1); term <= 3; term++ {
		if err := s.SetUint64(termKey, term); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, stableName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := bytes.Clone(b)
	last := int(s.seq%2) * stableSlot
	torn[last+stableHeader+3] ^= 0xff // inside the newest slot's body
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	wantTerm(t, openStable(t, dir), 2)
	torn[(1-s.seq%2)*stableSlot+5] ^= 0xff // the older slot's sequence
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStable(dir); err == nil || !strings.Contains(err.Error(), "neither slot") {
		t.Fatalf("open with both slots torn: %v, want a corrupt-store error", err)
	}
}

// TestStableStoreEarlierLayout: a store written in the earlier layout
// (one record, replaced by rename) is read and rewritten in slots.
func TestStableStoreEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	old := &StableStore{kv: map[string][]byte{string(termKey): {0, 0, 0, 0, 0, 0, 0, 9}, string(voteKey): []byte("b1")}}
	if err := os.WriteFile(filepath.Join(dir, stableName), old.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := openStable(t, dir)
	wantTerm(t, s, 9)
	if err := s.SetUint64(termKey, 10); err != nil {
		t.Fatal(err)
	}
	r := openStable(t, dir)
	wantTerm(t, r, 10)
	if v, _ := r.Get(voteKey); string(v) != "b1" {
		t.Fatalf("vote %q, want b1", v)
	}
}

// TestStableStoreTooLarge: a value that would outgrow a slot is refused
// and the store keeps its previous contents, in memory and on disk.
func TestStableStoreTooLarge(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir)
	if err := s.SetUint64(termKey, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(voteKey, make([]byte, stableSlot)); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized set: %v, want an exceeds-its-slot error", err)
	}
	if v, _ := s.Get(voteKey); len(v) != 0 {
		t.Fatalf("refused value kept in memory: %d bytes", len(v))
	}
	wantTerm(t, openStable(t, dir), 4)
}

// BenchmarkStableSet: one durable Set, as Raft makes two or three of on
// every vote.
func BenchmarkStableSet(b *testing.B) {
	s, err := OpenStable(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := s.SetUint64(termKey, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
