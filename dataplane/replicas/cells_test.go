package replicas_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// cellOf is a cell of its own peer CA, of brokers wired as tenantd wires
// them (a transport Node certified by the cell's CA, a replica Manager),
// whose cell state the test publishes as the control plane would. Two of
// them are the two cells of a tenant move. Broker b of the
// celltest.Serving methods is node b+1; Replica and Leader are of topic
// mvTopic.
type cellOf struct {
	t    *testing.T
	name string
	ca   *peercert.CA
	dirs []string
	raft func() *raft.Config

	// mu guards the fields below.
	mu         sync.Mutex
	brokers    []wire.Broker
	nodes      []*transport.Node
	committers []*raftlog.Committer
	managers   []*replicas.Manager // nil while stopped
	last       wire.CellState      // the last state published
}

func newCellOf(t *testing.T, name string, n int) *cellOf {
	return newCellOfRaft(t, name, n, celltest.TestRaftConfig)
}

// newCellOfRaft is newCellOf with brokers of Raft configuration rc.
func newCellOfRaft(t *testing.T, name string, n int, rc func() *raft.Config) *cellOf {
	t.Helper()
	ca, err := peercert.NewCA(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &cellOf{t: t, name: name, ca: ca, nodes: make([]*transport.Node, n), committers: make([]*raftlog.Committer, n),
		managers: make([]*replicas.Manager, n), dirs: make([]string, n), raft: rc}
	for i := range n {
		c.dirs[i] = filepath.Join(t.TempDir(), "replicas")
		c.start(i + 1)
	}
	t.Cleanup(func() {
		for i := range n {
			c.stop(i + 1)
		}
	})
	return c
}

// start starts node: on the Raft address it had, if it ran before, and
// applying the last state published (as a restarted broker applies its
// cached state).
func (c *cellOf) start(node int) {
	c.t.Helper()
	id := replicas.ServerID(node)
	creds, err := c.ca.Credentials(string(id))
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	addr := "127.0.0.1:0"
	if len(c.brokers) >= node {
		addr = c.brokers[node-1].RaftAddr
	}
	c.mu.Unlock()
	var tn *transport.Node
	celltest.WaitFor(c.t, 10*time.Second, "a transport on "+addr, func() bool {
		tn, err = transport.New(transport.Config{ID: id, ListenAddr: addr, Credentials: creds})
		return err == nil
	})
	com := raftlog.NewCommitter(log.SyncFiles)
	m, err := replicas.New(replicas.Config{NodeID: node, DataDir: c.dirs[node-1], Transport: tn, Committer: com,
		Raft: c.raft, CheckInterval: 100 * time.Millisecond, OffsetsPartitions: -1,
		Logger: celltest.Logger(c.t, slog.LevelInfo).With("cell", c.name, "node", node)})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	if len(c.brokers) < node {
		c.brokers = append(c.brokers, wire.Broker{ID: fmt.Sprintf("%s-b%d", c.name, node), NodeID: node, RaftAddr: string(tn.Addr())})
	}
	c.nodes[node-1], c.committers[node-1], c.managers[node-1] = tn, com, m
	last := c.last
	c.mu.Unlock()
	if last.StateVersion > 0 {
		if err := m.Apply(context.Background(), c.view(last)); err != nil {
			c.t.Logf("%s node %d apply: %v", c.name, node, err)
		}
	}
}

// stop closes node's manager, committer and transport.
func (c *cellOf) stop(node int) {
	c.mu.Lock()
	m, com, tn := c.managers[node-1], c.committers[node-1], c.nodes[node-1]
	c.managers[node-1], c.committers[node-1], c.nodes[node-1] = nil, nil, nil
	c.mu.Unlock()
	if m != nil {
		if err := m.Close(); err != nil {
			c.t.Errorf("close %s manager %d: %v", c.name, node, err)
		}
	}
	if com != nil {
		com.Close()
	}
	if tn != nil {
		_ = tn.Close()
	}
}

func (c *cellOf) view(st wire.CellState) *cellview.View {
	c.t.Helper()
	s, err := cellview.New(cellview.Config{Cell: c.name, CacheFile: filepath.Join(c.t.TempDir(), "state.json")})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := s.Apply(st); err != nil {
		c.t.Fatal(err)
	}
	return s.View()
}

// publish makes st (its version, cell and brokers filled in) the cell's
// state and applies it on every running broker.
func (c *cellOf) publish(st wire.CellState) int64 {
	c.t.Helper()
	c.mu.Lock()
	st.Version, st.Cell, st.StateVersion, st.Brokers = wire.Version, c.name, c.last.StateVersion+1, slices.Clone(c.brokers)
	c.last = st
	ms := slices.Clone(c.managers)
	c.mu.Unlock()
	v := c.view(st)
	for i, m := range ms {
		if m == nil {
			continue
		}
		if err := m.Apply(context.Background(), v); err != nil {
			c.t.Logf("%s node %d apply state %d: %v", c.name, i+1, st.StateVersion, err)
		}
	}
	return st.StateVersion
}

func (c *cellOf) manager(node int) *replicas.Manager {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.managers[node-1]
}

// mirrorBrokers is the cell's broker list as the other cell's state names
// it in a topic mirror.
func (c *cellOf) mirrorBrokers() []wire.MirrorBroker {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wire.MirrorBroker
	for _, b := range c.brokers {
		out = append(out, wire.MirrorBroker{NodeID: b.NodeID, RaftAddr: b.RaftAddr})
	}
	return out
}

func (c *cellOf) Partitions() int { return 1 }
func (c *cellOf) Brokers() int    { return len(c.dirs) }

func (c *cellOf) Replica(b, part int) *partition.Replica {
	m := c.manager(b + 1)
	if m == nil {
		return nil
	}
	r, _ := m.Get(mvTopic, int32(part))
	return r
}

func (c *cellOf) Leader(part int) int { return celltest.LeaderOf(c, part) }

func (c *cellOf) Produce(ctx context.Context, part int, batch []byte) (int64, error) {
	return celltest.ProduceToLeader(ctx, c, part, batch)
}

// leader is the serving leader replica of mvTopic's partition 0, or nil.
func (c *cellOf) leader() *partition.Replica {
	if b := c.Leader(0); b >= 0 {
		return c.Replica(b, 0)
	}
	return nil
}

// mirrorStatus is the serving leader's report of the partition's part in
// a move (nil if it reports none), and whether a leader reported.
func (c *cellOf) mirrorStatus() (*wire.MirrorStatus, bool) {
	b := c.Leader(0)
	if b < 0 {
		return nil, false
	}
	m := c.manager(b + 1)
	if m == nil {
		return nil, false
	}
	for _, st := range m.Status() {
		if st.TopicID == mvTopic && st.Partition == 0 && st.LeaderNode == b+1 {
			return st.Mirror, true
		}
	}
	return nil, false
}

// waitStatus waits until the leader's mirror status satisfies ok, logging
// it whenever it changes.
func (c *cellOf) waitStatus(what string, ok func(*wire.MirrorStatus) bool) *wire.MirrorStatus {
	c.t.Helper()
	last := ""
	var got *wire.MirrorStatus
	celltest.WaitFor(c.t, waitMove, what, func() bool {
		st, reported := c.mirrorStatus()
		if now := fmt.Sprintf("%v %+v", reported, st); now != last {
			c.t.Logf("%s leader's mirror status: %s", c.name, now)
			last = now
		}
		got = st
		return reported && ok(st)
	})
	return got
}

// hasDir reports whether node holds the partition's replica directory.
func (c *cellOf) hasDir(node int) bool {
	_, err := os.Stat(filepath.Join(c.dirs[node-1], mvTopic, "0"))
	return err == nil
}

// rawLog is r's log from its log start up to end, as its batches lie.
func rawLog(t *testing.T, r *partition.Replica, end int64) []byte {
	t.Helper()
	var out []byte
	for off := r.LogStartOffset(); off < end; {
		b, err := r.ReadRaw(off, 1<<20)
		if err != nil {
			t.Fatalf("read raw at %d: %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 && off < end {
			h, err := log.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b[:h.Size()]...)
			off, b = h.NextOffset(), b[h.Size():]
		}
	}
	return out
}

// sameBelow fails unless a's and b's logs are the same bytes below end.
func sameBelow(t *testing.T, a, b *partition.Replica, end int64) {
	t.Helper()
	if a.LogStartOffset() != b.LogStartOffset() {
		t.Fatalf("log starts %d and %d differ", a.LogStartOffset(), b.LogStartOffset())
	}
	x, y := rawLog(t, a, end), rawLog(t, b, end)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("logs below %d differ: %d and %d bytes", end, len(x), len(y))
	}
}
