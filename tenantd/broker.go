package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/controlplane/client"
	"github.com/sluicehq/sluice/dataplane/state"
)

// brokerConfig is what one broker needs.
type brokerConfig struct {
	Cell, BrokerID string
	APIURL         string
	CellKeyID      string
	CellKeySecret  string
	DataDir        string
}

func brokerConfigOf(cfg Config) brokerConfig {
	id, secret, _ := strings.Cut(cfg.CellKey, ":")
	return brokerConfig{Cell: cfg.Cell, BrokerID: cfg.BrokerID, APIURL: cfg.APIURL, CellKeyID: id, CellKeySecret: secret,
		DataDir: filepath.Join(cfg.DataDir, cfg.BrokerID)}
}

// runBroker wires one broker: its cached view of the cell's state, kept
// current from the control plane, and its reports back. It returns when ctx
// ends and every subsystem has stopped.
func runBroker(ctx context.Context, cfg brokerConfig, log *slog.Logger) error {
	log = log.With("broker", cfg.BrokerID)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create broker data dir: %w", err)
	}
	api := client.New(cfg.APIURL, client.WithAPIKey(cfg.CellKeyID, cfg.CellKeySecret))
	syncer, err := state.New(state.Config{Cell: cfg.Cell, API: api, CacheFile: filepath.Join(cfg.DataDir, "cell-state.json"), Logger: log})
	if err != nil {
		return err
	}
	reporter, err := state.NewReporter(state.ReporterConfig{Cell: cfg.Cell, BrokerID: cfg.BrokerID, API: api, DataDir: cfg.DataDir, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{syncer.Run, reporter.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
