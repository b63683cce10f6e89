package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// The broker's journal is on unless -journal=false or SLUICE_JOURNAL
// turns it off, the flag winning, and the setting reaches the broker's
// config; a SLUICE_JOURNAL that is not a boolean is refused.
func TestBrokerJournalConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{"default", nil, "", true},
		{"flag off", []string{"-journal=false"}, "", false},
		{"env off", nil, "false", false},
		{"env on", nil, "1", true},
		{"flag on beats env", []string{"-journal"}, "0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig("broker", brokerArgs(tc.args...), func(k string) string {
				if k == "SLUICE_JOURNAL" {
					return tc.env
				}
				return ""
			})
			if err != nil || cfg.Journal != tc.want || brokerConfigOf(cfg).Journal != tc.want {
				t.Fatalf("journal %v (broker %v), want %v: %v", cfg.Journal, brokerConfigOf(cfg).Journal, tc.want, err)
			}
		})
	}
	if _, err := loadConfig("broker", brokerArgs(), func(k string) string {
		if k == "SLUICE_JOURNAL" {
			return "sometimes"
		}
		return ""
	}); err == nil {
		t.Fatal("accepted SLUICE_JOURNAL=sometimes")
	}
}

// With the journal, the committer a broker opens writes its partitions'
// appends through data_dir/journal, and a store opened with it after a
// restart holds every entry it acknowledged. A broker then started
// without the journal replays and removes it, and keeps every entry.
func TestOpenCommitterWithJournal(t *testing.T) {
	dataDir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	replica := filepath.Join(dataDir, "replicas", "t", "0")
	journalDir := filepath.Join(dataDir, "journal")
	var want uint64
	for round, withJournal := range []bool{true, true, false} {
		com, closeCom, err := openCommitter(nil, dataDir, withJournal, logger)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(journalDir); (err == nil) != withJournal {
			t.Fatalf("round %d (journal %v): journal directory: %v", round, withJournal, err)
		}
		s, err := raftlog.Open(context.Background(), raftlog.Config{Dir: replica, Committer: com})
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := s.LastIndex(); last != want {
			t.Fatalf("round %d: last index %d after the restart, want %d", round, last, want)
		}
		for i := range 3 {
			want++
			e := &raft.Log{Index: want, Term: 1, Type: raft.LogCommand, Data: celltest.Batch([]byte{byte(round), byte(i)})}
			if err := s.StoreLogs([]*raft.Log{e}); err != nil {
				t.Fatal(err)
			}
		}
		// Acknowledged, and with the journal not fdatasynced in the
		// segment itself: the journal holds it.
		for path, n := range s.Log().FileDurable() {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if journaled := fi.Size() > n; journaled != withJournal {
				t.Fatalf("round %d (journal %v): segment %s is durable in its own file up to %d of %d bytes", round, withJournal, path, n, fi.Size())
			}
		}
		s.Close()
		closeCom()
	}
}
