package transport

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// countFSM records the commands applied to it.
type countFSM struct {
	mu      sync.Mutex
	applied [][]byte
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, l.Data)
	return len(f.applied)
}

func (f *countFSM) has(data string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.applied {
		if string(d) == data {
			return true
		}
	}
	return false
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }
func (f *countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noSnapshot struct{}

func (noSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noSnapshot) Release()                             {}

// cell is a test cell: len(nodes) brokers on loopback, each running one
// raft.Raft per group over its Node, sharing one Faults.
type cell struct {
	t      testing.TB
	faults *Faults
	nodes  []*Node
	groups []string
	rafts  map[string][]*raft.Raft
	fsms   map[string][]*countFSM
	trans  map[string][]*GroupTransport
}

func brokerID(i int) raft.ServerID { return raft.ServerID(fmt.Sprintf("b%d", i+1)) }

func newNodes(t testing.TB, n int, faults *Faults, mod func(*Config)) []*Node {
	t.Helper()
	var nodes []*Node
	for i := range n {
		cfg := Config{ID: brokerID(i), ListenAddr: "127.0.0.1:0", Faults: faults, Credentials: testCredentials(t, brokerID(i))}
		if mod != nil {
			mod(&cfg)
		}
		node, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := node.Close(); err != nil {
				t.Errorf("close node: %v", err)
			}
		})
		nodes = append(nodes, node)
	}
	return nodes
}

// newCell starts the cell. With batch > 0 groups start batch at a time,
// each batch waiting for its leaders, as groups are created over time in a
// real cell (starting a thousand elections at once on two cores starves
// heartbeats and elections never settle).
// Each rmod edits every group's Raft configuration (RaftConfig otherwise).
func newCell(t testing.TB, brokers, groups, batch int, mod func(*Config), rmod ...func(*raft.Config)) *cell {
	t.Helper()
	c := &cell{
		t: t, faults: NewFaults(),
		rafts: map[string][]*raft.Raft{},
		fsms:  map[string][]*countFSM{},
		trans: map[string][]*GroupTransport{},
	}
	c.nodes = newNodes(t, brokers, c.faults, mod)
	var servers []raft.Server
	for _, n := range c.nodes {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: n.ID(), Address: n.Addr()})
	}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard})
	// Registered after the Nodes' cleanups, so it runs before them: the
	// Nodes close only once every Raft has shut down.
	var all []*raft.Raft
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, r := range all {
			wg.Go(func() { _ = r.Shutdown().Error() })
		}
		wg.Wait()
	})
	for gi := range groups {
		g := fmt.Sprintf("g%03d", gi)
		c.groups = append(c.groups, g)
		for _, n := range c.nodes {
			tr, err := n.Group(g)
			if err != nil {
				t.Fatal(err)
			}
			var started atomic.Pointer[raft.Raft]
			tr.SetMembers(RaftMembers(started.Load, servers))
			tr.WatchPeers(servers) // the liveness probes, as partition replicas start them
			conf := RaftConfig(n.ID())
			conf.Logger = logger
			for _, m := range rmod {
				m(conf)
			}
			tr.QuiesceHeartbeats(conf.HeartbeatTimeout) // as partition replicas do
			fsm := &countFSM{}
			r, err := raft.NewRaft(conf, fsm, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore(), tr)
			if err != nil {
				t.Fatal(err)
			}
			started.Store(r)
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
			c.rafts[g] = append(c.rafts[g], r)
			c.fsms[g] = append(c.fsms[g], fsm)
			c.trans[g] = append(c.trans[g], tr)
		}
		if batch > 0 && (gi+1)%batch == 0 {
			c.waitLeaders(5 * time.Minute)
		}
	}
	return c
}

// leader returns the index of the node leading group g, or -1. Nodes in
// skip are ignored (an isolated old leader may still think it leads).
func (c *cell) leader(g string, skip ...int) int {
	found := -1
	for i, r := range c.rafts[g] {
		if contains(skip, i) || r.State() != raft.Leader {
			continue
		}
		if found >= 0 {
			return -1 // two claim it; wait for the stale one to step down
		}
		found = i
	}
	return found
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// leaderless counts the groups without exactly one leader.
func (c *cell) leaderless() int {
	n := 0
	for _, g := range c.groups {
		if c.leader(g) < 0 {
			n++
		}
	}
	return n
}

// settle polls until every group has one leader; false at the deadline.
func (c *cell) settle(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.leaderless() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func (c *cell) waitLeaders(timeout time.Duration, skip ...int) {
	c.t.Helper()
	testkit.WaitFor(c.t, timeout, fmt.Sprintf("every group to have one leader (skipping nodes %v)", skip), func() bool {
		for _, g := range c.groups {
			if c.leader(g, skip...) < 0 {
				return false
			}
		}
		return true
	})
}

// converged reports whether group g has one leader that every node knows.
func (c *cell) converged(g string) bool {
	l := c.leader(g)
	if l < 0 {
		return false
	}
	for _, r := range c.rafts[g] {
		if addr, _ := r.LeaderWithID(); addr != c.nodes[l].Addr() {
			return false
		}
	}
	return true
}

// apply commits data in group g through its leader and waits until every
// replica applied it. It does not fail the test itself, so it may run on
// any goroutine.
func (c *cell) apply(g, data string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var err error
		if l := c.leader(g); l >= 0 {
			if err = c.rafts[g][l].Apply([]byte(data), time.Until(deadline)).Error(); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apply %q in %s: no leader or %v", data, g, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		all := true
		for _, f := range c.fsms[g] {
			all = all && f.has(data)
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q not applied on every replica of %s within %s", data, g, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// applyAll runs apply for every group concurrently.
func (c *cell) applyAll(t testing.TB, groups []string, prefix string, timeout time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(groups))
	for _, g := range groups {
		wg.Go(func() { errs <- c.apply(g, prefix+g, timeout) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// leaderSpread counts the groups each node leads.
func (c *cell) leaderSpread() []int {
	spread := make([]int, len(c.nodes))
	for _, g := range c.groups {
		if l := c.leader(g); l >= 0 {
			spread[l]++
		}
	}
	return spread
}
