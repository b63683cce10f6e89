package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dataplane/journal"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// openCommitter starts the broker's group committer: with the journal, it
// first replays the journal under dataDir into the partition logs there
// (before any replica opens) and makes them durable through it. close
// stops the committer, then closes the journal.
//
// With reg set, the journal's counters are exported as
// sluice_journal_{rounds,bytes,fences,checkpoints}_total.
func openCommitter(reg prometheus.Registerer, dataDir string, withJournal bool, log *slog.Logger) (*raftlog.Committer, func(), error) {
	if !withJournal {
		if err := retireJournal(dataDir, log); err != nil {
			return nil, nil, err
		}
		com := raftlog.NewCommitter(dlog.SyncFiles)
		return com, com.Close, nil
	}
	j, rep, err := journal.Open(dataDir, journal.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("broker journal: %w", err)
	}
	log.Info("journal replayed", "records", rep.Records, "replayed", rep.Replayed, "bytes", rep.Bytes,
		"fenced", rep.Fenced, "gone", rep.Gone)
	unregister, err := journalMetrics(reg, j)
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	com := raftlog.NewJournalCommitter(j)
	return com, func() {
		com.Close()
		unregister()
		if err := j.Close(); err != nil {
			log.Error("close journal", "err", err)
		}
	}, nil
}

// journalMetrics exports j's counters on reg (nothing without one).
func journalMetrics(reg prometheus.Registerer, j *journal.Journal) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	var cs []prometheus.Collector
	for _, m := range []struct {
		name, help string
		get        func(journal.Stats) int64
	}{
		{"sluice_journal_rounds_total", "Group-commit rounds this broker made durable through its journal, one fdatasync each.", func(s journal.Stats) int64 { return s.Rounds }},
		{"sluice_journal_bytes_total", "Bytes of records this broker wrote to its journal.", func(s journal.Stats) int64 { return s.Bytes }},
		{"sluice_journal_fences_total", "Fences this broker's partition logs wrote to its journal before removing, truncating or replacing segment files.", func(s journal.Stats) int64 { return s.Fences }},
		{"sluice_journal_checkpoints_total", "Journal files this broker handed to their partition logs to sync before reusing them.", func(s journal.Stats) int64 { return s.Checkpoints }},
	} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, func() float64 { return float64(m.get(j.Stats())) })
		if err := reg.Register(c); err != nil {
			for _, r := range cs {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("register %s: %w", m.name, err)
		}
		cs = append(cs, c)
	}
	return func() {
		for _, c := range cs {
			reg.Unregister(c)
		}
	}, nil
}

// retireJournal replays a journal a broker that ran with one left in
// dataDir, then removes it: its records may hold acknowledged appends
// that no segment file has durably yet.
func retireJournal(dataDir string, log *slog.Logger) error {
	dir := filepath.Join(dataDir, "journal")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	j, rep, err := journal.Open(dataDir, journal.Options{})
	if err != nil {
		return fmt.Errorf("replay the broker journal before running without it: %w", err)
	}
	if err := j.Close(); err != nil {
		return fmt.Errorf("replay the broker journal before running without it: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the broker journal: %w", err)
	}
	log.Info("journal replayed and removed: running without one", "records", rep.Records, "replayed", rep.Replayed, "bytes", rep.Bytes)
	return nil
}
