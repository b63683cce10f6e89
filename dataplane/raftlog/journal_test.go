package raftlog_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/dataplane/journal"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// TestStoreModelJournal is TestStoreModel with the partition log made
// durable through a broker journal, and power cuts that keep of each
// segment file only what fdatasync made durable in the file itself (the
// rest lives in the journal until its checkpoint): after every cut the
// journal's replay must give back every acknowledged entry, and the
// truncations (Raft conflicts) in between must never come back.
func TestStoreModelJournal(t *testing.T) {
	for seed := int64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newJournaledStores(t)
			storeModelWith(t, seed, w)
			if w.crashes > 0 && w.replayed == 0 {
				t.Fatalf("%d power cuts and no record replayed: the cuts lost nothing, so the run shows nothing", w.crashes)
			}
		})
	}
}

// journaledStores opens stores under a root with a journal, and makes
// power-cut images of the whole root.
type journaledStores struct {
	t        *testing.T
	root     string
	j        *journal.Journal
	c        *raftlog.Committer
	replayed int
	crashes  int
}

func newJournaledStores(t *testing.T) *journaledStores {
	w := &journaledStores{t: t}
	w.start(t.TempDir())
	return w
}

func (w *journaledStores) start(root string) {
	j, rep, err := journal.Open(root, journal.Options{FileBytes: 64 << 10})
	if err != nil {
		w.t.Fatal(err)
	}
	w.root, w.j = root, j
	w.replayed += rep.Replayed
	w.c = raftlog.NewJournalCommitter(j)
	w.t.Cleanup(func() { w.c.Close(); j.Close() })
}

func (w *journaledStores) dir() string { return filepath.Join(w.root, "p") }

func (w *journaledStores) open() *raftlog.Store { return openStore(w.t, w.dir(), w.c) }

// crash leaves s open, copies the root as a power cut would leave it
// (segment files cut at what they hold durably, the entries file cut
// by powerCut), and starts again on the copy.
func (w *journaledStores) crash(s *raftlog.Store, rng *rand.Rand) *raftlog.Store {
	t := w.t
	w.crashes++
	_, flushed := s.Durable()
	img := testkit.CrashImage(t, w.root, s.Log().FileDurable())
	s.Close()
	w.c.Close()
	w.j.Close()
	if rng.Intn(2) == 0 {
		powerCut(t, filepath.Join(img, "p", "raft.entries"), flushed, rng)
	}
	w.start(img)
	return w.open()
}
