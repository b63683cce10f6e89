package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// Cluster is a control plane and one cell of brokers, each a real tenantd
// process started by cmd/internal/launch, on a scratch Postgres database,
// with a fault-injecting proxy in front of every broker's Raft listener.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	db      *launch.DB
	cp      *launch.ControlPlane
	cellKey string
	brokers []*broker
	net     *Network
	host    string // the loopback address the processes listen on
	// APIURL is the control plane's URL; Bootstrap the brokers' Kafka
	// addresses; KeyID and Secret the tenant's API key.
	APIURL       string
	Bootstrap    []string
	KeyID        string
	Secret       string
	tenantClient *client.Client
	topic        string // the workload topic's id, once read (move.go)
}

type broker struct {
	*launch.Broker
	idx int
	// mu guards p and stopped.
	mu      sync.Mutex
	p       *launch.Proc
	stopped bool // SIGSTOPped
}

const cellID = "chaos-cell"

// StartCluster creates the scratch database, starts the control plane,
// seeds the pool, cell, brokers, a tenant and its topic, and starts the
// brokers. Close undoes all of it.
//
// A broker comes back on its ports after every kill, so host is one of
// celltest.LoopbackHost's: on 127.0.0.1 a client socket of anything else on
// the machine could take a port while it is down.
func StartCluster(ctx context.Context, cfg Config, log *slog.Logger) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg, log: log, net: NewNetwork(log), host: celltest.LoopbackHost()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.db, err = launch.CreateDB(ctx, cfg.DatabaseURL, "sluice_chaos_"); err != nil {
		return nil, err
	}
	listen, err := launch.FreeAddr(c.host)
	if err != nil {
		return nil, err
	}
	if c.cp, err = launch.StartControlPlane(ctx, cfg.Tenantd, c.db.URL, listen, cfg.Dir, "warn"); err != nil {
		return nil, err
	}
	c.APIURL = c.cp.URL
	if err := c.seed(ctx, c.cp.Operator); err != nil {
		return nil, err
	}
	for _, b := range c.brokers {
		if err := c.StartBroker(b.idx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// seed creates the pool, cell and brokers (advertising their Raft proxies),
// a cell key, a tenant with an API key, and the topic.
func (c *Cluster) seed(ctx context.Context, op *client.Client) error {
	var brokers []*launch.Broker
	for i := range c.cfg.Brokers {
		addrs, err := launch.FreeAddrs(c.host, 3)
		if err != nil {
			return err
		}
		b := &launch.Broker{ID: fmt.Sprintf("b%d", i+1), NodeID: i + 1, DataDir: filepath.Join(c.cfg.Dir, "data"),
			RaftListen: addrs[0], Kafka: addrs[1], HTTP: addrs[2]}
		if c.cfg.Compact {
			b.Args = []string{"-compact-interval", c.cfg.CompactInterval.String()}
		}
		if b.Raft, err = c.net.Listen(i, strconv.Itoa(b.NodeID), b.RaftListen); err != nil {
			return err
		}
		brokers = append(brokers, b)
		c.brokers = append(c.brokers, &broker{Broker: b, idx: i})
		c.Bootstrap = append(c.Bootstrap, b.Kafka)
	}
	var err error
	if c.cellKey, err = launch.SeedCell(ctx, op, "chaos-shared", cellID, filepath.Join(c.cfg.Dir, "peer-certs"), brokers); err != nil {
		return err
	}
	t, err := launch.SignUp(ctx, c.cp, "chaos", "standard")
	if err != nil {
		return err
	}
	c.KeyID, c.Secret, c.tenantClient = t.KeyID, t.Secret, t.Client
	req := api.CreateTopicRequest{Name: c.cfg.Topic, Partitions: c.cfg.Partitions}
	if c.cfg.Retention > 0 {
		req.Config = map[string]string{
			topicspec.RetentionMs:  strconv.FormatInt(c.cfg.Retention.Milliseconds(), 10),
			topicspec.SegmentBytes: strconv.Itoa(1 << 20),
		}
	}
	if c.cfg.Compact {
		// 1 MiB segments, the floor, roll on the leaders' cleaner passes,
		// so closed segments are there to clean within seconds.
		req.Config = map[string]string{
			topicspec.CleanupPolicy:      "compact",
			topicspec.SegmentBytes:       strconv.Itoa(1 << 20),
			topicspec.MinCompactionLagMs: strconv.FormatInt(c.cfg.CompactLag.Milliseconds(), 10),
			topicspec.DeleteRetentionMs:  strconv.FormatInt(c.cfg.DeleteRetention.Milliseconds(), 10),
		}
	}
	if _, err := c.tenantClient.CreateTopic(ctx, req); err != nil {
		return fmt.Errorf("create topic %s: %w", c.cfg.Topic, err)
	}
	return nil
}

// Brokers is the number of brokers.
func (c *Cluster) Brokers() int { return len(c.brokers) }

// StartBroker starts broker i unless it runs.
func (c *Cluster) StartBroker(i int) error {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p != nil && b.p.Running() {
		return nil
	}
	p, err := b.Start(c.cfg.Tenantd, c.APIURL, cellID, c.cellKey, c.cfg.BrokerLogLevel, filepath.Join(c.cfg.Dir, b.ID+".log"))
	if err != nil {
		return err
	}
	b.p, b.stopped = p, false
	return nil
}

// KillBroker sends SIGKILL to broker i and waits for it to exit.
func (c *Cluster) KillBroker(i int) { c.signalAndWait(i, syscall.SIGKILL, 30*time.Second) }

// TermBroker stops broker i gracefully (SIGTERM), killing it if it has not
// exited within 30 s.
func (c *Cluster) TermBroker(i int) {
	if !c.signalAndWait(i, syscall.SIGTERM, 30*time.Second) {
		c.log.Warn("broker did not stop within 30 s of SIGTERM; killing it", "broker", c.brokers[i].ID)
		c.KillBroker(i)
	}
}

func (c *Cluster) signalAndWait(i int, sig syscall.Signal, limit time.Duration) bool {
	b := c.brokers[i]
	b.mu.Lock()
	p := b.p
	if p == nil || !p.Running() {
		b.mu.Unlock()
		return true
	}
	p.Signal(sig)
	if b.stopped {
		p.Signal(syscall.SIGCONT)
		b.stopped = false
	}
	b.mu.Unlock()
	return p.Wait(limit)
}

// PauseBroker sends SIGSTOP to broker i; ResumeBroker sends SIGCONT.
func (c *Cluster) PauseBroker(i int) { c.stopCont(i, true) }

// ResumeBroker resumes a paused broker.
func (c *Cluster) ResumeBroker(i int) { c.stopCont(i, false) }

func (c *Cluster) stopCont(i int, stop bool) {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil || !b.p.Running() {
		return
	}
	if stop {
		b.p.Signal(syscall.SIGSTOP)
	} else {
		b.p.Signal(syscall.SIGCONT)
	}
	b.stopped = stop
}

// HealAll heals the network, resumes paused brokers and starts stopped ones.
func (c *Cluster) HealAll() error {
	c.net.Heal()
	var errs []error
	for i := range c.brokers {
		c.ResumeBroker(i)
		errs = append(errs, c.StartBroker(i))
	}
	return errors.Join(errs...)
}

// running reports whether broker i's process runs.
func (c *Cluster) running(i int) bool {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p != nil && b.p.Running()
}

// Close stops every process, the proxies, and drops the scratch database.
func (c *Cluster) Close() {
	for i := range c.brokers {
		c.TermBroker(i)
	}
	if c.cp != nil {
		c.cp.Proc.Stop(20 * time.Second)
	}
	c.net.Close()
	if c.db != nil && !c.cfg.KeepDB {
		if err := c.db.Drop(); err != nil {
			c.log.Warn("drop scratch database", "err", err)
		}
	}
}

// DataDirs answers each broker's data directory, in broker order.
func (c *Cluster) DataDirs() []string {
	out := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		out[i] = filepath.Join(b.DataDir, b.ID)
	}
	return out
}
