package main

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
)

// TestChaosShort is the short chaos run of `make test`: the real tenantd
// binary, a control plane and four brokers (partitions on three of them:
// the move nemesis needs a spare), about 50 s of faults of every kind, with retention.ms 20 s on 1 MiB segments (1 KiB of random padding on
// each record) and DeleteRecords every 20 s, then the checker. The seed varies per run and is logged; set
// SLUICE_CHAOS_SEED to replay one.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tenantd and runs a cell of real processes under faults for about 90 s")
	}
	res, err := shortRun(t, 8*time.Minute, Config{
		Duration: 50 * time.Second, Interval: 7 * time.Second, Nemeses: Nemeses,
		Partitions: 3, Producers: 2, Consumers: 1, GroupConsumers: 2, Keys: 8, Rate: 150,
		SessionLength: 15 * time.Second, FinalTimeout: 3 * time.Minute, BrokerLogLevel: "info",
		Retention: 20 * time.Second, DeleteEvery: 20 * time.Second, RecordPad: 1024,
	})
	if err != nil {
		t.Fatalf("chaos run did not complete: %v", err)
	}
	if res.Acks < 100 {
		t.Errorf("only %d writes were acknowledged: the run proves little", res.Acks)
	}
	if res.Records == 0 {
		t.Error("the consumers polled nothing")
	}
	if res.GroupRecords == 0 {
		t.Error("the group's members polled nothing")
	}
	moved := 0
	for _, s := range res.LogStarts {
		if s > 0 {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no partition's log start moved (%v): the run did not exercise retention or DeleteRecords", res.LogStarts)
	}
	if !res.Valid() {
		t.Fatalf("the history violates the delivery contract (seed %d)", res.seed)
	}
}

// TestChaosCompactShort is the short chaos run against a compacted topic
// (-compact): two partitions with 1 MiB segments and 1 KiB of random
// padding per record at 600 records a second, so the leaders roll and the
// cleaner (every 3 s) compacts during the run; 20 s of faults every 5 s,
// then the compaction model: offsets never reused, a record vanishes only
// below a newer one of its key or a tombstone of it; about one produce in
// ten is a tombstone, kept 5 s (delete.retention.ms). About 30 s.
func TestChaosCompactShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tenantd and runs a cell of real processes under faults for about 30 s")
	}
	res, err := shortRun(t, 6*time.Minute, Config{
		Duration: 20 * time.Second, Interval: 5 * time.Second, Nemeses: Nemeses,
		Partitions: 2, Producers: 2, Consumers: 1, GroupConsumers: 2, Keys: 8, Rate: 600,
		SessionLength: 10 * time.Second, FinalTimeout: 3 * time.Minute, BrokerLogLevel: "info",
		Compact: true, CompactLag: time.Second, CompactInterval: 3 * time.Second, RecordPad: 1024,
		Tombstones: 10, DeleteRetention: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("chaos run did not complete: %v", err)
	}
	if res.Acks < 1000 {
		t.Errorf("only %d writes were acknowledged: the run proves little", res.Acks)
	}
	if res.Compacted == 0 {
		t.Error("the final reads have no gap: the cleaner compacted nothing during the run")
	}
	if res.Tombstones == 0 {
		t.Error("no tombstone was acknowledged: the model's deletes went unchecked")
	}
	if !res.Valid() {
		t.Fatalf("the history violates the compaction model (seed %d)", res.seed)
	}
}

// shortRun is one short chaos run of cfg, bounded by limit, with the
// package's tenantd, a scratch directory, the seed from SLUICE_CHAOS_SEED
// (or the clock, logged), and the summary and, on a failed or invalid run,
// the last lines of every process's log in the test's log.
func shortRun(t *testing.T, limit time.Duration, cfg Config) (shortOutcome, error) {
	t.Helper()
	cfg.Tenantd, cfg.Dir, cfg.Seed = buildTenantd(t), t.TempDir(), time.Now().UnixNano()
	if s := os.Getenv("SLUICE_CHAOS_SEED"); s != "" {
		var err error
		if cfg.Seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED: %v", err)
		}
	}
	cfg.DatabaseURL = cmp.Or(os.Getenv("SLUICE_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	var out bytes.Buffer
	log := testkit.Logger(t, slog.LevelInfo)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t.Logf("seed %d (SLUICE_CHAOS_SEED=%d replays the fault schedule)", cfg.Seed, cfg.Seed)
	res, err := Run(ctx, cfg, log, &out)
	t.Logf("summary:\n%s", out.String())
	if err != nil || !res.Valid() {
		logs, _ := filepath.Glob(filepath.Join(cfg.Dir, "*.log"))
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			lines := strings.Split(string(b), "\n")
			t.Logf("last lines of %s:\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	return shortOutcome{Outcome: res, seed: cfg.Seed}, err
}

// shortOutcome is a short run's outcome and the seed that replays it.
type shortOutcome struct {
	Outcome
	seed int64
}

// tenantd is built once for the package's tests (TestMain removes it).
var tenantd struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func buildTenantd(t *testing.T) string {
	t.Helper()
	tenantd.once.Do(func() {
		if tenantd.dir, tenantd.err = os.MkdirTemp("", "chaos-tenantd-"); tenantd.err != nil {
			return
		}
		tenantd.bin, tenantd.err = testkit.CompileTenantd(tenantd.dir)
	})
	if tenantd.err != nil {
		t.Fatal(tenantd.err)
	}
	return tenantd.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tenantd.dir != "" {
		os.RemoveAll(tenantd.dir)
	}
	os.Exit(code)
}
