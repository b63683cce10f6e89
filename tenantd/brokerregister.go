package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// registerRetry bounds how often a broker retries its registration while
// the control plane is away.
const registerRetry = 5 * time.Second

// registerBroker registers the broker with its cell (node id and the
// addresses it advertises, from its flags and environment) until the
// control plane accepts, retrying while it cannot be reached. The cell
// state then lists the broker, which runReplicas waits for; a broker
// restarting with the control plane away serves from its cached state
// meanwhile. A refusal (another node id under this broker id, say) ends
// the broker with the control plane's error.
func registerBroker(ctx context.Context, c *client.Client, cfg brokerConfig, log *slog.Logger) error {
	wait := 250 * time.Millisecond
	for {
		var b api.Broker
		err := c.Do(ctx, http.MethodPut, "/internal/v1/cells/"+url.PathEscape(cfg.Cell)+"/brokers/"+url.PathEscape(cfg.BrokerID), cfg.Register, &b)
		if err == nil {
			log.Info("registered with the cell", "node_id", b.NodeID, "kafka_addr", b.KafkaAddr, "http_addr", b.HTTPAddr, "raft_addr", b.RaftAddr)
			return nil
		}
		var ce *client.Error
		if errors.As(err, &ce) && !ce.Retriable && ce.Status < 500 {
			return fmt.Errorf("register broker %s with cell %s: %w", cfg.BrokerID, cfg.Cell, err)
		}
		log.Warn("register with the cell; will retry", "err", err)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, registerRetry)
	}
}

// peerCAPEM is the cell's peer CA certificate as the broker registers it
// (wire.Registration.PeerCA): the control plane publishes it to the other
// cell of a tenant move, whose brokers then admit this one's mirror reads
// (as a destination) or check its certificate (as a source). A file that
// is not a PEM CA certificate fails the start: the control plane would
// refuse it.
func peerCAPEM(file string) (string, error) {
	if file == "" {
		return "", nil // no transport TLS: nothing to publish
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read peer CA for registration: %w", err)
	}
	pem := string(b)
	if _, err := (wire.MirrorGrant{Cell: "-", TenantID: "-", Topics: []string{"-"}, PeerCA: pem}).CAs(); err != nil {
		return "", fmt.Errorf("peer CA %s: %w", file, err)
	}
	return pem, nil
}
