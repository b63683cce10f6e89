package replicated

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/kafka"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// managedCell is a control plane and three brokers wired as tenantd wires
// them: a Raft transport and a replica manager that follows the cell state
// (so each topic's settings reach its replicas from the state), and a
// Kafka listener over the manager's replicas.
type managedCell struct {
	t       testing.TB
	cp      *cptest.Env
	addrs   []string
	brokers []*managedBroker
}

type managedBroker struct {
	node    int
	syncer  *cellview.Syncer
	manager *replicas.Manager
}

// managedPartitions adapts a replica manager to the front doors, as
// tenantd's replicaPartitions does.
type managedPartitions struct{ m *replicas.Manager }

func (p managedPartitions) Get(topicID string, part int32) (frontdoor.Partition, bool) {
	r, ok := p.m.Get(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

// startManagedCell starts the cell; configure, if set, adjusts every
// broker's replica manager config. Everything stops in t.Cleanup.
func startManagedCell(t testing.TB, configure func(*replicas.Config)) *managedCell {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane on Postgres and a three-broker cell")
	}
	host := celltest.LoopbackHost()
	c := &managedCell{t: t}
	lns := make([]net.Listener, 3)
	for i := range lns {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.addrs = append(c.addrs, ln.Addr().String())
	}
	c.cp = cptest.Start(t, cptest.Brokers{KafkaAddrs: c.addrs})
	logger := celltest.Logger(t, slog.LevelWarn)
	nodes := make([]*transport.Node, 3)
	for i := range nodes {
		tn, err := transport.New(transport.Config{ID: replicas.ServerID(i + 1), ListenAddr: net.JoinHostPort(host, "0"),
			Credentials: celltest.PeerCredentials(t, replicas.ServerID(i+1))})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = tn
		addr := string(tn.Addr())
		if _, err := c.cp.Operator.AdminUpdateBroker(context.Background(), fmt.Sprintf("%s-b%d", cptest.Cell, i+1), api.UpdateBrokerRequest{RaftAddr: &addr}); err != nil {
			t.Fatal(err)
		}
	}
	cellAPI := c.cp.CellClient()
	ids := &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
		return cellAPI.AllocateProducerIDs(ctx, cptest.Cell, n)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var closers []func()
	for i, tn := range nodes {
		dir := t.TempDir()
		b := &managedBroker{node: i + 1}
		syncer := cellstack.Syncer(t, c.cp.CellClient(), cptest.Cell, dir, 2*time.Second, logger)
		com := raftlog.NewCommitter(dlog.SyncFiles)
		mc := replicas.Config{NodeID: b.node, DataDir: filepath.Join(dir, "replicas"), Transport: tn, Committer: com,
			Raft: celltest.TestRaftConfig, CheckInterval: 100 * time.Millisecond, OffsetsPartitions: -1, Logger: logger}
		if configure != nil {
			configure(&mc)
		}
		m, err := replicas.New(mc)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := kafka.New(kafka.Config{Listener: lns[i], NodeID: b.node, State: syncer, Partitions: managedPartitions{m},
			ProducerIDs: ids, Logger: logger, MaxFetchWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.syncer, b.manager = syncer, m
		c.brokers = append(c.brokers, b)
		wg.Add(3)
		go func() { defer wg.Done(); _ = syncer.Run(ctx) }()
		go func() { defer wg.Done(); _ = ks.Serve(ctx) }()
		go func() {
			defer wg.Done()
			for {
				changed := syncer.Changed()
				if err := m.Apply(ctx, syncer.View()); err != nil && ctx.Err() == nil {
					t.Logf("broker %d apply: %v", b.node, err)
				}
				select {
				case <-ctx.Done():
					return
				case <-changed:
				}
			}
		}()
		closers = append(closers, func() {
			ks.Close()
			if err := m.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
				t.Errorf("close replicas %d: %v", b.node, err)
			}
			com.Close()
			_ = tn.Close()
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, cl := range closers {
			cl()
		}
	})
	return c
}

// createTopic creates a topic of tn with config and waits until every
// broker holds a replica of each partition and each has a serving leader.
func (c *managedCell) createTopic(tn *cptest.Tenant, name string, parts int, config map[string]string) string {
	c.t.Helper()
	if _, err := tn.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: name, Partitions: parts, Config: config}); err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
	syncers := make([]*cellview.Syncer, len(c.brokers))
	for i, b := range c.brokers {
		syncers[i] = b.syncer
	}
	id := cellstack.WaitKnown(c.t, 30*time.Second, managedKey(tn), name, syncers...)
	celltest.WaitFor(c.t, 30*time.Second, "topic "+name+" led on every broker's replicas", func() bool {
		for p := range parts {
			if c.leader(id, p) == nil {
				return false
			}
		}
		return true
	})
	return id
}

// replica is broker b's replica of a partition (nil if it has none).
func (c *managedCell) replica(b int, topicID string, part int) *partition.Replica {
	r, _ := c.brokers[b].manager.Get(topicID, int32(part))
	return r
}

// leader is the serving leader's replica of a partition, nil while none
// serves or a broker lacks its replica.
func (c *managedCell) leader(topicID string, part int) *partition.Replica {
	var lead *partition.Replica
	for b := range c.brokers {
		r := c.replica(b, topicID, part)
		if r == nil {
			return nil
		}
		if r.IsLeader() {
			lead = r
		}
	}
	return lead
}

// client is a franz-go client of tn seeded with every broker.
func (c *managedCell) client(t testing.TB, tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)
	return cellstack.Client(t, managedKey(tn), c.addrs, 30*time.Second, opts...)
}

func managedKey(tn *cptest.Tenant) cellstack.Key {
	return cellstack.Key{TenantID: tn.Tenant.ID, ID: tn.KeyID, Secret: tn.Secret}
}
