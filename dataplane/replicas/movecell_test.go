package replicas_test

import (
	"context"
	"errors"
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
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

const moveTopic = "tp_move"

// moveCell is a cell of brokers, each a transport Node and a replica
// Manager as tenantd wires them, serving one partition whose placement the
// test publishes as the control plane would (apply). It is a
// celltest.Serving, so celltest's workload and checker run on it; broker
// b of the workload is node b+1.
type moveCell struct {
	t       *testing.T
	brokers []wire.Broker
	dirs    []string
	faults  *transport.Faults // links between the brokers, by node id in decimal

	// mu guards the fields below.
	mu       sync.Mutex
	nodes    []*transport.Node
	managers []*replicas.Manager // nil once stopped
	version  int64
	part     wire.Partition
}

func newMoveCell(t *testing.T, n int) *moveCell {
	t.Helper()
	c := &moveCell{t: t, nodes: make([]*transport.Node, n), managers: make([]*replicas.Manager, n), dirs: make([]string, n),
		faults: transport.NewFaults()}
	for i := range n {
		id := replicas.ServerID(i + 1)
		tn, err := transport.New(transport.Config{ID: id, ListenAddr: "127.0.0.1:0", Credentials: celltest.PeerCredentials(t, id), Faults: c.faults})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = tn
		c.brokers = append(c.brokers, wire.Broker{ID: fmt.Sprintf("b%d", i+1), NodeID: i + 1, RaftAddr: string(tn.Addr())})
		c.dirs[i] = filepath.Join(t.TempDir(), "replicas")
		com := raftlog.NewCommitter(log.SyncFiles)
		t.Cleanup(com.Close)
		m, err := replicas.New(replicas.Config{NodeID: i + 1, DataDir: c.dirs[i], Transport: tn, Committer: com,
			Raft: celltest.TestRaftConfig, CheckInterval: 100 * time.Millisecond, OffsetsPartitions: -1,
			Logger: celltest.Logger(t, slog.LevelInfo).With("node", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		c.managers[i] = m
	}
	t.Cleanup(func() {
		for i := range n {
			c.stop(i + 1)
		}
	})
	return c
}

// apply publishes p as the partition's placement to every running broker.
func (c *moveCell) apply(p wire.Partition) {
	c.t.Helper()
	c.mu.Lock()
	c.version++
	c.part = p
	view := viewOf(c.t, wire.CellState{StateVersion: c.version, Brokers: c.brokers,
		Topics: []wire.Topic{{ID: moveTopic, Name: "move", Partitions: []wire.Partition{p}}}})
	ms := slices.Clone(c.managers)
	c.mu.Unlock()
	c.t.Logf("cell state %d: replicas %v adding %v removing %v", c.version, p.Replicas, p.Adding, p.Removing)
	for i, m := range ms {
		if m == nil {
			continue
		}
		if err := m.Apply(context.Background(), view); err != nil {
			c.t.Logf("node %d apply: %v", i+1, err)
		}
	}
}

// stop closes node's manager and transport (a broker stopped for good).
func (c *moveCell) stop(node int) {
	c.mu.Lock()
	m, tn := c.managers[node-1], c.nodes[node-1]
	c.managers[node-1], c.nodes[node-1] = nil, nil
	c.mu.Unlock()
	if m != nil {
		if err := m.Close(); err != nil {
			c.t.Errorf("close manager %d: %v", node, err)
		}
	}
	if tn != nil {
		_ = tn.Close()
	}
}

func (c *moveCell) Partitions() int { return 1 }
func (c *moveCell) Brokers() int    { return len(c.brokers) }

func (c *moveCell) Replica(b, part int) *partition.Replica {
	c.mu.Lock()
	m := c.managers[b]
	c.mu.Unlock()
	if m == nil {
		return nil
	}
	r, _ := m.Get(moveTopic, int32(part))
	return r
}

func (c *moveCell) Leader(part int) int { return celltest.LeaderOf(c, part) }

func (c *moveCell) Produce(ctx context.Context, part int, batch []byte) (int64, error) {
	return celltest.ProduceToLeader(ctx, c, part, batch)
}

// membership is the serving leader's configuration, as node ids, or ok
// false while there is none.
func (c *moveCell) membership() (voters, nonvoters []int, ok bool) {
	b := c.Leader(0)
	if b < 0 {
		return nil, nil, false
	}
	r := c.Replica(b, 0)
	if r == nil {
		return nil, nil, false
	}
	v, nv := r.Membership()
	return ids(v), ids(nv), v != nil
}

func ids(s []raft.ServerID) []int {
	out := []int{}
	for _, id := range s {
		var n int
		fmt.Sscan(string(id), &n)
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// waitVoters waits until the leader's configuration is exactly voters,
// logging the configuration whenever it changes, so a failure shows
// where the move stood.
func (c *moveCell) waitVoters(timeout time.Duration, voters ...int) {
	c.t.Helper()
	want := slices.Sorted(slices.Values(voters))
	last := ""
	celltest.WaitFor(c.t, timeout, fmt.Sprintf("the leader's configuration to be voters %v and no non-voter", want), func() bool {
		v, nv, ok := c.membership()
		now := "no serving leader"
		if ok {
			now = fmt.Sprintf("leader node %d: voters %v non-voters %v", c.Leader(0)+1, v, nv)
		}
		if now != last {
			c.t.Logf("configuration: %s", now)
			last = now
		}
		return ok && slices.Equal(v, want) && len(nv) == 0
	})
}

// waitGone waits until nodes hold no replica of the partition and no
// replica directory.
func (c *moveCell) waitGone(timeout time.Duration, nodes ...int) {
	c.t.Helper()
	for _, n := range nodes {
		dir := filepath.Join(c.dirs[n-1], moveTopic, "0")
		celltest.WaitFor(c.t, timeout, fmt.Sprintf("node %d without a replica or its directory", n), func() bool {
			if c.Replica(n-1, 0) != nil {
				return false
			}
			_, err := os.Stat(dir)
			return errors.Is(err, os.ErrNotExist)
		})
	}
}

// status is node's report of the partition.
func (c *moveCell) status(node int) (wire.PartitionStatus, bool) {
	c.mu.Lock()
	m := c.managers[node-1]
	c.mu.Unlock()
	if m == nil {
		return wire.PartitionStatus{}, false
	}
	for _, st := range m.Status() {
		if st.TopicID == moveTopic && st.Partition == 0 {
			return st, true
		}
	}
	return wire.PartitionStatus{}, false
}

// leaderStatus is the serving leader's report of the partition.
func (c *moveCell) leaderStatus() (wire.PartitionStatus, bool) {
	b := c.Leader(0)
	if b < 0 {
		return wire.PartitionStatus{}, false
	}
	return c.status(b + 1)
}

// hasDir reports whether node holds the partition's replica directory.
func (c *moveCell) hasDir(node int) bool {
	_, err := os.Stat(filepath.Join(c.dirs[node-1], moveTopic, "0"))
	return err == nil
}
