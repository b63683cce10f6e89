package replicas_test

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/dataplane/replicas"
)

// A negative seed rate is refused: it would mean nothing.
func TestSeedRateValidated(t *testing.T) {
	tn, com := nodeDeps(t, 1)
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
