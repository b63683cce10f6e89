package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// freeAddr is testkit.FreeAddr on loopback, failing t on an error.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testkit.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startBrokerRole runs `tenantd broker` in-process as broker of cp's
// seeded cell with the cell key ck, its Raft, Kafka and HTTP listeners on
// free ports, advertising Raft at 127.0.0.1:1, and the listener named by
// listenFlag (say -health-listen) at a free address, which it returns.
// stop cancels the broker and fails t unless it stops within 30 s with
// nothing worse than the cancellation.
func startBrokerRole(t *testing.T, cp *cptest.Env, ck api.CellKey, broker, listenFlag string) (addr string, stop func()) {
	t.Helper()
	addr = freeAddr(t)
	args := append([]string{"-cell", cptest.Cell, "-broker-id", broker, "-api", cp.URL,
		"-cell-key", ck.ID + ":" + ck.Secret, "-data-dir", t.TempDir(), listenFlag, addr,
		"-raft-listen", "127.0.0.1:0", "-raft-advertise", "127.0.0.1:1", "-kafka-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0"},
		peerFiles(t, "1")...)
	cfg, err := loadConfig("broker", args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	stopBroker := goBrokerRole(cfg)
	return addr, func() {
		t.Helper()
		if err := stopBroker(); err != nil {
			t.Fatal(err)
		}
	}
}

// goBrokerRole runs `tenantd broker` with cfg in-process on a goroutine of
// its own. stop cancels it and says how it ended: nil when it stopped
// within 30 s with nothing worse than the cancellation, so that each test
// decides whether a bad stop ends it.
func goBrokerRole(cfg Config) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runBrokerRole(ctx, cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("broker stopped with %w", err)
			}
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("the broker did not stop within 30 s")
		}
	}
}
