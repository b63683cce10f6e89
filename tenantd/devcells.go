package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// devCell is one cell of the dev fleet: its pool, its three brokers, and
// where under the data dir it keeps its cell key and peer certificates.
// Each cell has a peer CA of its own, as separate deployments would, so a
// tenant move between them goes through the control plane's CA exchange.
type devCell struct {
	Pool, Kind, ID string
	Brokers        []api.CreateBrokerRequest
	KeyFile        string // the cell key, under the data dir
	CertDir        string // the peer CA and broker certificates, under the data dir
}

// devDedicatedBrokers are the dedicated cell's; node ids are per cell. Their
// addresses follow the shared cell's (devAddrs).
var devDedicatedBrokers = []api.CreateBrokerRequest{
	{ID: "dev-b4", CellID: "dev-cell-2", NodeID: 1, KafkaAddr: "127.0.0.1:9095", HTTPAddr: "127.0.0.1:8094", RaftAddr: "127.0.0.1:7004"},
	{ID: "dev-b5", CellID: "dev-cell-2", NodeID: 2, KafkaAddr: "127.0.0.1:9096", HTTPAddr: "127.0.0.1:8095", RaftAddr: "127.0.0.1:7005"},
	{ID: "dev-b6", CellID: "dev-cell-2", NodeID: 3, KafkaAddr: "127.0.0.1:9097", HTTPAddr: "127.0.0.1:8096", RaftAddr: "127.0.0.1:7006"},
}

// The dev cells: the shared one every signup lands on, and (unless
// -dedicated-cell=false) a dedicated pool's cell to move a tenant to.
var (
	devSharedCell    = devCell{Pool: "dev-shared", Kind: "shared", ID: "dev-cell-1", Brokers: devBrokers, KeyFile: "cell-key", CertDir: "peer-certs"}
	devDedicatedCell = devCell{Pool: "dev-dedicated", Kind: "dedicated", ID: "dev-cell-2", Brokers: devDedicatedBrokers,
		KeyFile: "cell-key-dev-cell-2", CertDir: "peer-certs-dev-cell-2"}
)

// devCellsOf lists the cells dev runs with cfg.
func devCellsOf(cfg Config) []devCell {
	if cfg.DedicatedCell {
		return []devCell{devSharedCell, devDedicatedCell}
	}
	return []devCell{devSharedCell}
}

// devFleetBrokers counts the brokers of cells, for devAddrs.
func devFleetBrokers(cells []devCell) int {
	n := 0
	for _, c := range cells {
		n += len(c.Brokers)
	}
	return n
}

// brokerIDs lists the cell's broker ids for the banner.
func (c devCell) brokerIDs() string {
	ids := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		ids[i] = b.ID
	}
	return strings.Join(ids, ", ")
}

// seed creates the cell's pool, the cell and its brokers unless they
// exist, and sets the brokers' addresses to the given ones (one per
// broker, in order).
func (c devCell) seed(ctx context.Context, op *client.Client, raftAddrs, kafkaAddrs, httpAddrs []string) error {
	ignoreExists := func(_ any, err error) error {
		if client.IsCode(err, "already_exists") {
			return nil
		}
		return err
	}
	if err := ignoreExists(op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: c.Pool, Kind: c.Kind, Description: "dev " + c.Kind + " pool"})); err != nil {
		return fmt.Errorf("seed pool %s: %w", c.Pool, err)
	}
	if err := ignoreExists(op.AdminCreateCell(ctx, api.CreateCellRequest{ID: c.ID, PoolID: c.Pool})); err != nil {
		return fmt.Errorf("seed cell %s: %w", c.ID, err)
	}
	for i, b := range c.Brokers {
		b.RaftAddr, b.KafkaAddr, b.HTTPAddr = raftAddrs[i], kafkaAddrs[i], httpAddrs[i]
		if err := ignoreExists(op.AdminCreateBroker(ctx, b)); err != nil {
			return fmt.Errorf("seed broker %s: %w", b.ID, err)
		}
		if _, err := op.AdminUpdateBroker(ctx, b.ID, api.UpdateBrokerRequest{RaftAddr: &raftAddrs[i], KafkaAddr: &kafkaAddrs[i], HTTPAddr: &httpAddrs[i]}); err != nil {
			return fmt.Errorf("set addresses of broker %s: %w", b.ID, err)
		}
	}
	return nil
}

// peerCerts keeps the cell's CA and its brokers' Raft transport
// certificates under dataDir/CertDir, reusing those already there.
func (c devCell) peerCerts(dataDir string) (map[string]peercert.Files, error) {
	ids := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		ids[i] = string(replicas.ServerID(b.NodeID))
	}
	files, err := peercert.EnsureDir(filepath.Join(dataDir, c.CertDir), c.ID, ids)
	if err != nil {
		return nil, fmt.Errorf("dev peer certificates of %s: %w", c.ID, err)
	}
	return files, nil
}

// cellKey reuses the cell key saved under dataDir while it still works for
// this cell, or makes and saves one.
func (c devCell) cellKey(ctx context.Context, op *client.Client, dataDir string) (api.CellKey, error) {
	keyFile := filepath.Join(dataDir, c.KeyFile)
	if b, err := os.ReadFile(keyFile); err == nil {
		var k api.CellKey
		if json.Unmarshal(b, &k) == nil && k.ID != "" && k.CellID == c.ID {
			cell := op.With(client.WithAPIKey(k.ID, k.Secret))
			if _, _, err := cell.CellState(ctx, k.CellID, 1<<62, 0); err == nil {
				return k, nil
			}
		}
	}
	k, err := op.AdminCreateCellKey(ctx, c.ID)
	if err != nil {
		return k, fmt.Errorf("create dev cell key of %s: %w", c.ID, err)
	}
	b, _ := json.Marshal(k)
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		return k, fmt.Errorf("save dev cell key of %s: %w", c.ID, err)
	}
	return k, nil
}

// devRegistration is what a dev broker registers at start, as `tenantd
// broker -node-id` with the advertise flags would: its node id, its
// addresses and (from peer.CA, by runBroker) its cell's peer CA, which the
// control plane hands the other cell of a tenant move.
func devRegistration(b api.CreateBrokerRequest, raftAddr, kafkaAddr, httpAddr string) wire.Registration {
	return wire.Registration{NodeID: b.NodeID, KafkaAddr: kafkaAddr, HTTPAddr: httpAddr, RaftAddr: raftAddr}
}

// devDedicatedBanner is the banner's line for the cells after the shared
// one (empty with -dedicated-cell=false), with the move that uses them.
// kafka and http are each cell's addresses.
func devDedicatedBanner(cells []devCell, kafka, http [][]string) string {
	var b strings.Builder
	for i, c := range cells[1:] {
		fmt.Fprintf(&b, "  Dedicated: %s of pool %s (%s) with brokers %s (Kafka %s, HTTP %s)\n", c.ID, c.Pool, c.Kind, c.brokerIDs(),
			strings.Join(kafka[i+1], ","), strings.Join(http[i+1], ","))
		fmt.Fprintf(&b, "             tenantd admin tenants move <tenant> -pool %s -watch: its clients keep their bootstrap address\n", c.Pool)
	}
	return b.String()
}
