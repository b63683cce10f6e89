package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func confEntry(term uint64, servers ...raft.Server) *raft.Log {
	return &raft.Log{Type: raft.LogConfiguration, Term: term, Data: raft.EncodeConfiguration(raft.Configuration{Servers: servers})}
}

func voter(id string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id)}
}

func nonvoter(id string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(id)}
}

// TestJoinGateEntries: a joining replica's gate opens only on a
// configuration entry of its join's term or later that makes it a voter;
// an older one that does (a configuration replayed from the group's
// history) neither opens it nor lets it vote; its addition as a non-voter
// lets it vote; the mark survives a reopen until the gate opens.
func TestJoinGateEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ID: "1", Dir: dir, Join: true}
	g, err := openJoinGate(cfg, false)
	if err != nil || !g.gated() {
		t.Fatalf("new joiner: gate %v, err %v", g, err)
	}
	if err := writeJoinFile(dir, 5); err != nil {
		t.Fatal(err)
	}
	g, err = openJoinGate(cfg, true)
	if err != nil || !g.gated() || g.term.Load() != 5 {
		t.Fatalf("reopened joiner: gate %+v, err %v", g, err)
	}
	cases := []struct {
		name        string
		e           *raft.Log
		opens, vote bool
	}{
		{"old configuration naming it a voter", confEntry(3, voter("1"), voter("2"), voter("3")), false, false},
		{"data entry of the join's term", &raft.Log{Type: raft.LogCommand, Term: 5}, false, false},
		{"configuration of the join's term without it", confEntry(5, voter("4"), voter("5"), voter("6")), false, false},
		{"its addition as a non-voter", confEntry(5, voter("4"), voter("5"), voter("6"), nonvoter("1")), false, true},
		{"its promotion", confEntry(6, voter("4"), voter("5"), voter("6"), voter("1")), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g.votes.Store(false)
			if got := g.opens("1", tc.e); got != tc.opens {
				t.Errorf("opens = %v, want %v", got, tc.opens)
			}
			if got := g.votes.Load(); got != tc.vote {
				t.Errorf("votes = %v, want %v", got, tc.vote)
			}
		})
	}
	if err := g.open(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, joinFile)); !os.IsNotExist(err) {
		t.Fatalf("join mark after the gate opened: %v", err)
	}
	if g, err := openJoinGate(cfg, true); err != nil || g.gated() {
		t.Fatalf("replica with state and no mark reopened gated: %+v, %v", g, err)
	}
	if g, err := openJoinGate(Config{ID: "1", Dir: t.TempDir()}, false); err != nil || g.gated() {
		t.Fatalf("replica not joining opened gated: %+v, %v", g, err)
	}
}
