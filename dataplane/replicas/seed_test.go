package replicas_test

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// A negative seed rate is refused: it would mean nothing.
func TestSeedRateValidated(t *testing.T) {
	id := replicas.ServerID(1)
	tn, err := transport.New(transport.Config{ID: id, ListenAddr: "127.0.0.1:0", Credentials: celltest.PeerCredentials(t, id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.Close() })
	com := raftlog.NewCommitter(log.SyncFiles)
	t.Cleanup(com.Close)
	cfg := replicas.Config{NodeID: 1, DataDir: filepath.Join(t.TempDir(), "r"), Transport: tn, Committer: com, SeedRate: -1}
	if _, err := replicas.New(cfg); err == nil {
		t.Fatal("accepted a negative seed rate")
	}
	cfg.SeedRate = 0
	m, err := replicas.New(cfg)
	if err != nil {
		t.Fatalf("seed rate 0 (unlimited): %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
