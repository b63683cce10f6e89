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

// The broker's journal is off unless -journal or SLUICE_JOURNAL=1 turns
// it on, and the setting reaches the broker's config.
func TestBrokerJournalConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{"default", nil, "", false},
		{"flag", []string{"-journal"}, "", true},
		{"env", nil, "1", true},
		{"flag off beats env", []string{"-journal=false"}, "1", false},
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
}

// With the journal, the committer a broker opens writes its partitions'
// appends through data_dir/journal, and a store opened with it after a
// restart holds every entry it acknowledged.
func TestOpenCommitterWithJournal(t *testing.T) {
	dataDir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	replica := filepath.Join(dataDir, "replicas", "t", "0")
	var want uint64
	for round := range 2 {
		com, closeCom, err := openCommitter(dataDir, true, logger)
		if err != nil {
			t.Fatal(err)
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
		// Acknowledged, and not fdatasynced in the segment itself: the
		// journal holds it.
		for path, n := range s.Log().FileDurable() {
			if fi, err := os.Stat(path); err != nil || fi.Size() <= n {
				t.Fatalf("round %d: segment %s is durable in its own file up to %d of %v bytes: the journal was not used (%v)", round, path, n, fi.Size(), err)
			}
		}
		s.Close()
		closeCom()
	}
	for _, f := range []string{"0", "1"} {
		if fi, err := os.Stat(filepath.Join(dataDir, "journal", f)); err != nil || fi.Size() == 0 {
			t.Fatalf("journal file %s: %v", f, err)
		}
	}
}
