package raftlog_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// modelEntry is what the model remembers of an entry.
type modelEntry struct {
	term    uint64
	typ     raft.LogType
	records int // data entries only
	data    []byte
}

// TestStoreModel drives a store with random appends, tail truncations
// (Raft conflicts), no-op prefix deletes, reopenings and power cuts (the
// entries file cut anywhere after its flushed prefix, junk appended),
// and checks after
// every step that it agrees with a plain model: Raft indexes contiguous
// from 1, each data entry's base offset is the sum of the records before
// it, non-data entries take no offset, epochs equal terms.
func TestStoreModel(t *testing.T) {
	for seed := int64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			storeModelWith(t, seed, &plainStores{t: t, dir: dir, c: newCommitter(t)})
		})
	}
}

// modelStores is how a model run opens its store and cuts power.
type modelStores interface {
	open() *raftlog.Store
	crash(s *raftlog.Store, rng *rand.Rand) *raftlog.Store
}

// plainStores syncs each partition log's own files.
type plainStores struct {
	t   *testing.T
	dir string
	c   *raftlog.Committer
}

func (p *plainStores) open() *raftlog.Store { return openStore(p.t, p.dir, p.c) }

func (p *plainStores) crash(s *raftlog.Store, rng *rand.Rand) *raftlog.Store {
	_, flushed := s.Durable()
	s.Close()
	if rng.Intn(2) == 0 {
		powerCut(p.t, filepath.Join(p.dir, "raft.entries"), flushed, rng)
	}
	return p.open()
}

func storeModelWith(t *testing.T, seed int64, stores modelStores) {
	rng := rand.New(rand.NewSource(seed))
	s := stores.open()
	var model []modelEntry
	term := uint64(1)
	for step := 0; step < 150; step++ {
		switch op := rng.Intn(10); {
		case op < 6: // append a few entries
			n := 1 + rng.Intn(4)
			next := uint64(len(model) + 1)
			plainOnly := rng.Intn(2) == 0 // a call of batches only
			var logs []*raft.Log
			for i := 0; i < n; i++ {
				e := modelEntry{term: term}
				l := &raft.Log{Index: next + uint64(i), Term: term}
				kind := rng.Intn(4)
				if plainOnly {
					kind = 2
				}
				switch kind {
				case 0:
					e.typ = raft.LogNoop
				case 1:
					e.typ = raft.LogConfiguration
					e.data = []byte(fmt.Sprintf("cfg-%d", step))
				default:
					e.typ = raft.LogCommand
					e.records = 1 + rng.Intn(3)
					vals := make([][]byte, e.records)
					for k := range vals {
						vals[k] = []byte(fmt.Sprintf("s%d-%d-%d", step, i, k))
					}
					e.data = celltest.Batch(vals...)
				}
				l.Type, l.Data = e.typ, e.data
				logs = append(logs, l)
				model = append(model, e)
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		case op < 8: // a conflict: a new term truncates a suffix
			if len(model) == 0 {
				continue
			}
			from := 1 + rng.Intn(len(model))
			if err := s.DeleteRange(uint64(from), uint64(len(model))); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			model = model[:from-1]
			term++
		case op < 9: // compaction keeps everything
			if len(model) > 1 {
				if err := s.DeleteRange(1, uint64(rng.Intn(len(model)-1)+1)); err != nil {
					t.Fatal(err)
				}
			}
		default:
			s = stores.crash(s, rng)
		}
		checkModel(t, step, s, model)
	}
}

// powerCut keeps the flushed prefix of the file at path and a random part
// of what followed, then sometimes appends junk. Every acknowledged append
// flushed the partition log, so the log keeps all of its batches.
func powerCut(t *testing.T, path string, flushed int64, rng *rand.Rand) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > flushed {
		if err := os.Truncate(path, flushed+rng.Int63n(fi.Size()-flushed+1)); err != nil {
			t.Fatal(err)
		}
	}
	if rng.Intn(2) == 0 {
		junk := make([]byte, 1+rng.Intn(40))
		rng.Read(junk)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(junk)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkModel(t *testing.T, step int, s interface {
	LastIndex() (uint64, error)
	GetLog(uint64, *raft.Log) error
	Log() *log.Log
}, model []modelEntry) {
	t.Helper()
	if l, _ := s.LastIndex(); l != uint64(len(model)) {
		t.Fatalf("step %d: last index %d, model %d", step, l, len(model))
	}
	var kafka int64
	for i, e := range model {
		var got raft.Log
		if err := s.GetLog(uint64(i+1), &got); err != nil {
			t.Fatalf("step %d: get %d: %v", step, i+1, err)
		}
		if got.Term != e.term || got.Type != e.typ {
			t.Fatalf("step %d: entry %d: term %d type %v, model %d %v", step, i+1, got.Term, got.Type, e.term, e.typ)
		}
		if e.typ != raft.LogCommand {
			if !bytes.Equal(got.Data, e.data) {
				t.Fatalf("step %d: entry %d data %q, model %q", step, i+1, got.Data, e.data)
			}
			continue
		}
		h, err := log.ValidateBatch(got.Data)
		if err != nil {
			t.Fatalf("step %d: entry %d: %v", step, i+1, err)
		}
		if h.BaseOffset != kafka || int(h.LastOffsetDelta)+1 != e.records || uint64(h.LeaderEpoch) != e.term {
			t.Fatalf("step %d: entry %d: base %d records %d epoch %d; model %d %d %d",
				step, i+1, h.BaseOffset, h.LastOffsetDelta+1, h.LeaderEpoch, kafka, e.records, e.term)
		}
		kafka += int64(e.records)
	}
	if n := s.Log().NextOffset(); n != kafka {
		t.Fatalf("step %d: log end %d, model %d", step, n, kafka)
	}
}
