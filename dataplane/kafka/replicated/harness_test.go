package replicated

import (
	"context"
	"log/slog"
	"net"
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
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// The seam: a Raft replica is a Kafka partition.
var _ kafka.Partition = (*partition.Replica)(nil)

// cell is a control plane, a replicated cell and a Kafka listener per
// broker. Broker b of the celltest cell is node b+1 of the control plane.
type cell struct {
	t      testing.TB
	cp     *cptest.Env
	cell   *celltest.Cell
	addrs  []string
	states []*cellview.Syncer
	ids    kafka.ProducerIDs
	logger *slog.Logger
	homes  kafka.Homes // for listeners started from now on; nil: no key-home lookups

	// topicID is the one topic whose partitions are the cell's groups.
	topicID string

	// offsets, when the cell serves consumer groups, holds the offsets
	// partitions (a second set of Raft groups over the same three
	// brokers); coords are the brokers' coordinators (nil while down).
	offsets   *celltest.Cell
	coords    []*groups.Coordinator
	configure func(b int, cfg *kafka.Config) // nil: the defaults

	// mu guards the fields below.
	mu      sync.Mutex
	servers []*server // nil while a broker is down
}

type server struct {
	srv  *kafka.Server
	done chan error
}

// startCell starts everything with parts partitions (Raft groups) for one
// topic, and creates that topic for a new tenant. Everything stops in
// t.Cleanup.
func startCell(t testing.TB, parts int, topic string) (*cell, *cptest.Tenant) {
	t.Helper()
	return startCellWith(t, parts, topic, cellOptions{})
}

// startGroupCell is startCell with consumer groups: offsetsParts offsets
// partitions and a coordinator per broker.
func startGroupCell(t testing.TB, parts int, topic string, offsetsParts int) (*cell, *cptest.Tenant) {
	t.Helper()
	return startCellWith(t, parts, topic, cellOptions{offsetsParts: offsetsParts})
}

// startReadyGroupCell is startGroupCell that also waits until every
// partition has a leader and every broker's coordinator has loaded its
// offsets partitions.
func startReadyGroupCell(t testing.TB, parts int, topic string, offsetsParts int) (*cell, *cptest.Tenant) {
	t.Helper()
	c, tn := startGroupCell(t, parts, topic, offsetsParts)
	for p := range parts {
		c.cell.WaitLeader(p, 30*time.Second)
	}
	c.waitCoordinators()
	return c, tn
}

// cellOptions adjust startCellWith; zero fields keep startCell's defaults.
type cellOptions struct {
	// configure adjusts broker b's listener config before it starts.
	configure func(b int, cfg *kafka.Config)
	// raft is the replicas' Raft config (default celltest.TestRaftConfig).
	raft func() *raft.Config
	// groups is the number of Raft groups when more than the topic's
	// partitions (configure then maps the extra ones to other topics).
	groups int
	// offsetsParts, when positive, serves consumer groups: that many
	// offsets partitions and a coordinator per broker.
	offsetsParts int
	// meter is the produce-metering sink of broker b's replica of a
	// group (celltest.Options.Meter).
	meter func(b, group int) partition.MeterSink
}

// startCellWith is startCell with options.
func startCellWith(t testing.TB, parts int, topic string, opts cellOptions) (*cell, *cptest.Tenant) {
	t.Helper()
	c := &cell{t: t, servers: make([]*server, 3), coords: make([]*groups.Coordinator, 3), configure: opts.configure}
	lns := make([]net.Listener, 3)
	host := celltest.LoopbackHost() // brokers restart on their ports
	for b := range lns {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns[b] = ln
		c.addrs = append(c.addrs, ln.Addr().String())
	}
	c.cp = cptest.Start(t, cptest.Brokers{KafkaAddrs: c.addrs})
	c.logger = celltest.Logger(t, slog.LevelWarn)
	c.cell = celltest.New(t, celltest.Options{Partitions: max(parts, opts.groups), Raft: opts.raft, Meter: opts.meter})
	if opts.offsetsParts > 0 {
		c.offsets = celltest.New(t, celltest.Options{Partitions: opts.offsetsParts, Raft: opts.raft})
	}
	cellAPI := c.cp.CellClient()
	c.ids = &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
		return cellAPI.AllocateProducerIDs(ctx, cptest.Cell, n)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for b := 0; b < 3; b++ {
		st := cellstack.Syncer(t, c.cp.CellClient(), cptest.Cell, t.TempDir(), 5*time.Second, c.logger)
		c.states = append(c.states, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Run(ctx)
		}()
	}
	t.Cleanup(func() {
		for b := range c.servers {
			c.stopServer(b)
		}
		cancel()
		wg.Wait()
	})

	tn := c.cp.Signup("acme", "admin")
	if _, err := tn.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: topic, Partitions: parts}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	c.topicID = cellstack.WaitKnown(t, 20*time.Second, keyOf(tn), topic, c.states...)
	for b := 0; b < 3; b++ {
		c.startServer(b, lns[b])
	}
	return c, tn
}

// startServer starts broker b's listener, on ln or else on its address.
func (c *cell) startServer(b int, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		ln = cellstack.Listen(c.t, c.addrs[b])
	}
	var coord *groups.Coordinator
	if c.offsets != nil {
		var err error
		coord, err = groups.New(groups.Config{NodeID: b + 1, Partitions: c.offsets.Partitions(), Logger: c.logger,
			MinSessionTimeout: time.Second, InitialRebalanceDelay: 200 * time.Millisecond, CheckInterval: 50 * time.Millisecond,
			Offsets: func(p int32) (groups.Log, bool) {
				r := c.offsets.Replica(b, int(p))
				if r == nil {
					return nil, false
				}
				return r, true
			}})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	cfg := kafka.Config{Listener: ln, NodeID: b + 1, State: c.states[b], Partitions: partitions{c, b},
		ProducerIDs: c.ids, Groups: coord, Logger: c.logger, MaxFetchWait: 2 * time.Second, Homes: c.homes}
	if c.configure != nil {
		c.configure(b, &cfg)
	}
	srv, err := kafka.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	s := &server{srv: srv, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(context.Background()) }()
	c.mu.Lock()
	c.servers[b] = s
	c.coords[b] = coord
	c.mu.Unlock()
}

func (c *cell) stopServer(b int) {
	c.mu.Lock()
	s := c.servers[b]
	coord := c.coords[b]
	c.servers[b], c.coords[b] = nil, nil
	c.mu.Unlock()
	if s == nil {
		return
	}
	if err := s.srv.Close(); err != nil {
		c.t.Errorf("close listener %d: %v", b, err)
	}
	if coord != nil {
		coord.Close()
	}
	if err := <-s.done; err != nil {
		c.t.Errorf("serve %d: %v", b, err)
	}
}

// kill stops broker b as a process exit would: its listener and replicas.
func (c *cell) kill(b int) {
	c.stopServer(b)
	c.cell.StopBroker(b)
	if c.offsets != nil {
		c.offsets.StopBroker(b)
	}
}

// restart starts broker b's replicas from disk and then its listener.
func (c *cell) restart(b int) {
	c.cell.StartBroker(b)
	if c.offsets != nil {
		c.offsets.StartBroker(b)
	}
	c.startServer(b, nil)
}

// client is a franz-go client of the tenant seeded with every broker.
func (c *cell) client(t testing.TB, tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return cellstack.Client(t, keyOf(tn), c.addrs, 60*time.Second,
		append([]kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
}

// partitions is broker b's replicas, as the listener sees them.
type partitions struct {
	c *cell
	b int
}

func (p partitions) Get(topicID string, part int32) (kafka.Partition, bool) {
	if topicID != p.c.topicID || part < 0 || int(part) >= p.c.cell.Partitions() {
		return nil, false
	}
	r := p.c.cell.Replica(p.b, int(part))
	if r == nil {
		return nil, false
	}
	return r, true
}

// waitCoordinators waits until every offsets partition is led by its
// preferred replica (celltest rotates replicas, so partition p's is
// broker p mod 3), where leadership stays unless a test moves it, and that
// broker's coordinator has loaded it.
func (c *cell) waitCoordinators() {
	c.t.Helper()
	celltest.WaitFor(c.t, 60*time.Second, "every offsets partition led by its preferred broker and loaded", func() bool {
		for p := range c.offsets.Partitions() {
			b := p % c.offsets.Brokers()
			if c.offsets.Leader(p) != b {
				return false
			}
			c.mu.Lock()
			co := c.coords[b]
			c.mu.Unlock()
			if co == nil || !co.Loaded(int32(p)) {
				return false
			}
		}
		return true
	})
}

// keyOf is a cptest tenant's key, as cellstack takes it.
func keyOf(tn *cptest.Tenant) cellstack.Key {
	return cellstack.Key{TenantID: tn.Tenant.ID, ID: tn.KeyID, Secret: tn.Secret}
}
