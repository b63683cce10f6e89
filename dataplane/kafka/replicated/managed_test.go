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
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/kafka"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// managedCell is a control plane and three brokers wired as tenantd
// wires them: each broker's replicas follow the cell state (a
// replicas.Manager, production Raft timeouts), and its Kafka listener
// serves CreateTopics through the control plane. Topics are created by
// the test, through Kafka or /v1.
type managedCell struct {
	t       testing.TB
	cp      *cptest.Env
	addrs   []string
	syncers []*cellview.Syncer
	mgrs    []*replicas.Manager
	nodes   []*transport.Node
}

type managedPartitions struct{ m *replicas.Manager }

func (p managedPartitions) Get(topicID string, part int32) (kafka.Partition, bool) {
	r, ok := p.m.Get(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

// startManagedCell starts the cell with raftConfig for every replica
// (nil: partition.DefaultRaftConfig, what tenantd runs).
func startManagedCell(t testing.TB, raftConfig func() *raft.Config) *managedCell {
	t.Helper()
	return startManagedCellWith(t, raftConfig, nil)
}

// startManagedCellWith is startManagedCell with configure, if set,
// adjusting every broker's replica manager config.
func startManagedCellWith(t testing.TB, raftConfig func() *raft.Config, configure func(*replicas.Config)) *managedCell {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane on Postgres and a three-broker cell")
	}
	if raftConfig == nil {
		raftConfig = partition.DefaultRaftConfig
	}
	m := &managedCell{t: t}
	host := celltest.LoopbackHost()
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		m.addrs = append(m.addrs, ln.Addr().String())
	}
	m.cp = cptest.Start(t, cptest.Brokers{KafkaAddrs: m.addrs})
	logger := celltest.Logger(t, slog.LevelWarn)
	for i := range 3 {
		id := replicas.ServerID(i + 1)
		tn, err := transport.New(transport.Config{ID: id, ListenAddr: net.JoinHostPort(host, "0"), Credentials: celltest.PeerCredentials(t, id)})
		if err != nil {
			t.Fatal(err)
		}
		m.nodes = append(m.nodes, tn)
		addr := string(tn.Addr())
		if _, err := m.cp.Operator.AdminUpdateBroker(context.Background(), fmt.Sprintf("%s-b%d", cptest.Cell, i+1), api.UpdateBrokerRequest{RaftAddr: &addr}); err != nil {
			t.Fatal(err)
		}
	}
	cellAPI := m.cp.CellClient()
	ids := &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
		return cellAPI.AllocateProducerIDs(ctx, cptest.Cell, n)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var stops []func()
	t.Cleanup(func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		cancel()
		wg.Wait()
	})
	for i := range 3 {
		dir := t.TempDir()
		st, err := cellview.New(cellview.Config{Cell: cptest.Cell, API: m.cp.CellClient(), CacheFile: filepath.Join(dir, "state.json"),
			Wait: 5 * time.Second, RetryEvery: 100 * time.Millisecond, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		m.syncers = append(m.syncers, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Run(ctx)
		}()
		com := raftlog.NewCommitter(dlog.SyncFiles)
		mc := replicas.Config{NodeID: i + 1, DataDir: filepath.Join(dir, "replicas"), Transport: m.nodes[i], Committer: com,
			Raft: raftConfig, OffsetsPartitions: -1, Logger: logger}
		if configure != nil {
			configure(&mc)
		}
		mgr, err := replicas.New(mc)
		if err != nil {
			t.Fatal(err)
		}
		m.mgrs = append(m.mgrs, mgr)
		applied := make(chan struct{})
		go func() {
			defer close(applied)
			for {
				changed := st.Changed()
				if err := mgr.Apply(ctx, st.View()); err != nil && ctx.Err() == nil {
					t.Logf("broker %d apply: %v", i+1, err)
				}
				select {
				case <-ctx.Done():
					return
				case <-changed:
				}
			}
		}()
		srv, err := kafka.New(kafka.Config{Listener: lns[i], NodeID: i + 1, State: st, Partitions: managedPartitions{mgr},
			ProducerIDs: ids, Logger: logger, MaxFetchWait: 2 * time.Second, ControlPlane: client.New(m.cp.URL)})
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(context.Background()) }()
		node := m.nodes[i]
		stops = append(stops, func() {
			if err := srv.Close(); err != nil {
				t.Errorf("close listener %d: %v", i+1, err)
			}
			if err := <-served; err != nil {
				t.Errorf("serve %d: %v", i+1, err)
			}
			cancel()
			<-applied
			if err := mgr.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
				t.Errorf("close replicas %d: %v", i+1, err)
			}
			com.Close()
			_ = node.Close()
		})
	}
	return m
}

// tenant signs up a tenant with an admin key known to every broker.
func (m *managedCell) tenant(name string) *cptest.Tenant {
	m.t.Helper()
	tn := m.cp.Signup(name, "admin")
	celltest.WaitFor(m.t, 30*time.Second, "key on every broker", func() bool {
		for _, st := range m.syncers {
			if _, err := st.View().Authenticate(tn.KeyID, tn.Secret, time.Now()); err != nil {
				return false
			}
		}
		return true
	})
	return tn
}

// client is a franz-go client of the tenant with franz-go's defaults
// (retries, timeouts), as an application would have it.
func (m *managedCell) client(tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	m.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(m.addrs...), kgo.SASL(plain.Auth{User: tn.KeyID, Pass: tn.Secret}.AsMechanism())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(cl.Close)
	return cl
}
