package main

import (
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/dataplane/journal"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// openCommitter starts the broker's group committer: with the journal, it
// first replays the journal under dataDir into the partition logs there
// (before any replica opens) and makes them durable through it. close
// stops the committer, then closes the journal.
func openCommitter(dataDir string, withJournal bool, log *slog.Logger) (*raftlog.Committer, func(), error) {
	if !withJournal {
		com := raftlog.NewCommitter(dlog.SyncFiles)
		return com, com.Close, nil
	}
	j, rep, err := journal.Open(dataDir, journal.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("broker journal: %w", err)
	}
	log.Info("journal replayed", "records", rep.Records, "replayed", rep.Replayed, "bytes", rep.Bytes,
		"fenced", rep.Fenced, "gone", rep.Gone)
	com := raftlog.NewJournalCommitter(j)
	return com, func() {
		com.Close()
		if err := j.Close(); err != nil {
			log.Error("close journal", "err", err)
		}
	}, nil
}
