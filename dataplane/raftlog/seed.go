package raftlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// A replica behind its leader's log start is seeded: another replica's
// segment files are copied into SeedDir, then InstallSeed swaps them in for
// the partition log and restarts the entries file after the Raft snapshot
// the copy completes (see DESIGN.md, "Seeding a replica from segments").
const (
	seedDirName  = "seed"         // segment files being copied in
	seedOldName  = "log.replaced" // the partition log being replaced
	seedPlanName = "seed.install" // the install in progress: finished by Open
	// baseRecord is the type of an entries-file record that holds no
	// entry: it says the store starts after Raft index index (of term
	// term), at Kafka offset at. It is only ever the file's first record.
	baseRecord raft.LogType = 0xff
)

// SeedPlan is what a seeded store starts from: the Raft snapshot the copy
// completes and the Kafka offsets the copied segments hold.
type SeedPlan struct {
	// Index and Term are the Raft snapshot's; the store's next entry is
	// Index+1.
	Index, Term uint64
	// Offset is the Kafka offset after Index (the snapshot's high
	// watermark): where the copied segments end.
	Offset int64
	// LogStart is the first offset the copy holds.
	LogStart int64
}

// SeedDir is where a seeding replica copies segment files before
// InstallSeed. It is created by the caller and kept across restarts, so a
// copy resumes where its bytes end.
func (s *Store) SeedDir() string { return filepath.Join(s.cfg.Dir, seedDirName) }

// InstallSeed replaces the partition log with the segment files copied
// into SeedDir (which must end at p.Offset) and the entries file with one
// that starts after p.Index at p.Offset, so the store takes Raft's entries
// from p.Index+1 on. The intent is recorded durably first; a crash part
// way is finished by the next Open. A failure fails the store.
func (s *Store) InstallSeed(ctx context.Context, p SeedPlan) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	err := s.usable()
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("install seed: %w", err)
	}
	if p.Offset < p.LogStart || p.LogStart < 0 || p.Term > maxEpochTerm {
		return fmt.Errorf("install seed: bad plan %+v", p)
	}
	if err := writePlan(s.cfg.Dir, p); err != nil {
		return fmt.Errorf("install seed: %w", err)
	}
	if err := s.log.Replace(ctx, s.SeedDir(), filepath.Join(s.cfg.Dir, seedOldName), p.LogStart); err != nil {
		return s.fail(fmt.Errorf("install seed: %w", err))
	}
	if got := s.log.NextOffset(); got != p.Offset {
		return s.fail(fmt.Errorf("install seed: %w: seeded log ends at %d, the snapshot at %d", ErrInconsistent, got, p.Offset))
	}
	f, size, err := writeBaseEntries(s.cfg.Dir, p)
	if err != nil {
		return s.fail(fmt.Errorf("install seed: %w", err))
	}
	s.mu.Lock()
	old := s.idx
	s.idx = f
	s.first, s.ents, s.kafkaNext, s.size, s.synced = p.Index+1, nil, p.Offset, size, size
	s.seeded, s.seedConf = p.Index, false
	s.mu.Unlock()
	old.Close()
	if err := removePlan(s.cfg.Dir); err != nil {
		return s.fail(fmt.Errorf("install seed: %w", err))
	}
	s.cfg.Logger.Info("replica seeded from segments", "after_index", p.Index, "log_start_offset", p.LogStart, "next_offset", p.Offset)
	return nil
}

// SeededAfter is the Raft index of the snapshot a seed started this store
// after, as far as the entries file still says (0 if never seeded, or
// checkpointed since and reopened).
func (s *Store) SeededAfter() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seeded
}

// AwaitingConfiguration reports whether the store was seeded and has
// stored no configuration entry since: Raft's configuration is then the
// seed snapshot's, which for a replica added after that snapshot does not
// list it yet.
func (s *Store) AwaitingConfiguration() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seeded > 0 && !s.seedConf
}

// finishSeed completes an install a crash interrupted (Open calls it
// before it opens the log): every step is redone or found done.
func finishSeed(cfg Config) error {
	p, ok, err := readPlan(cfg.Dir)
	if err != nil || !ok {
		return err
	}
	old := filepath.Join(cfg.Dir, seedOldName)
	if err := log.SwapDirs(filepath.Join(cfg.Dir, seedDirName), cfg.Log.Dir, old); err != nil {
		return fmt.Errorf("finish seed install: %w", err)
	}
	// While the plan stands the log directory holds the copy and nothing
	// else: its start is the plan's.
	if err := log.WriteStartCheckpoint(cfg.Log.Dir, p.LogStart); err != nil {
		return fmt.Errorf("finish seed install: %w", err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("finish seed install: %w", err)
	}
	f, _, err := writeBaseEntries(cfg.Dir, p)
	if err != nil {
		return fmt.Errorf("finish seed install: %w", err)
	}
	f.Close()
	cfg.Logger.Info("finished an interrupted seed install", "after_index", p.Index, "next_offset", p.Offset)
	return removePlan(cfg.Dir)
}

// writeBaseEntries replaces the entries file with one holding only a base
// record for p, durably, and returns it open with its size.
func writeBaseEntries(dir string, p SeedPlan) (*os.File, int64, error) {
	rec := appendRecord(nil, p.Index, entry{term: p.Term, typ: baseRecord, at: p.Offset})
	path := filepath.Join(dir, entriesName)
	tmp := path + ".seed"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, 0, err
	}
	if err := pwriteAll(f, rec, 0); err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = log.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("write seeded %s: %w", entriesName, err)
	}
	return f, int64(len(rec)), nil
}

func writePlan(dir string, p SeedPlan) error {
	body := fmt.Sprintf("v1 %d %d %d %d\n", p.Index, p.Term, p.Offset, p.LogStart)
	path := filepath.Join(dir, seedPlanName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = log.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", seedPlanName, err)
	}
	return nil
}

func readPlan(dir string) (SeedPlan, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, seedPlanName))
	if errors.Is(err, os.ErrNotExist) {
		return SeedPlan{}, false, nil
	}
	if err != nil {
		return SeedPlan{}, false, fmt.Errorf("read %s: %w", seedPlanName, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 5 || f[0] != "v1" {
		return SeedPlan{}, false, fmt.Errorf("read %s: unrecognized content %q", seedPlanName, b)
	}
	var n [4]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil || n[i] < 0 {
			return SeedPlan{}, false, fmt.Errorf("read %s: bad field %q", seedPlanName, f[i+1])
		}
	}
	return SeedPlan{Index: uint64(n[0]), Term: uint64(n[1]), Offset: n[2], LogStart: n[3]}, true, nil
}

func removePlan(dir string) error {
	if err := os.Remove(filepath.Join(dir, seedPlanName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", seedPlanName, err)
	}
	return log.SyncDir(dir)
}
