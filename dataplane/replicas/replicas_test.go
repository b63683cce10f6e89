package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

const wait = 30 * time.Second

// broker is one broker of the test cell: transport, committer, state
// syncer and replica manager, applying every new view as tenantd does.
type broker struct {
	node    int
	dir     string
	syncer  *cellview.Syncer
	manager *replicas.Manager
}

func startBroker(t *testing.T, env *cptest.Env, node int, tn *transport.Node) *broker {
	t.Helper()
	b := &broker{node: node, dir: t.TempDir()}
	com := raftlog.NewCommitter(log.SyncFiles)
	t.Cleanup(com.Close)
	t.Cleanup(func() { _ = tn.Close() })
	m, err := replicas.New(replicas.Config{NodeID: node, DataDir: filepath.Join(b.dir, "replicas"), Transport: tn,
		Committer: com,
		// Short timeouts: a handful of groups do not need the many-group
		// ones, and the test waits for elections.
		Raft: celltest.TestRaftConfig, CheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.manager = m
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close manager %d: %v", node, err)
		}
	})
	s, err := cellview.New(cellview.Config{Cell: cptest.Cell, API: env.CellClient(), CacheFile: filepath.Join(b.dir, "state.json"), Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.syncer = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); _ = s.Run(ctx) }()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			changed := s.Changed()
			if err := m.Apply(ctx, s.View()); err != nil && ctx.Err() == nil {
				t.Logf("broker %d apply: %v", node, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return b
}

func TestManagersFollowControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane on Postgres")
	}
	env := cptest.Start(t, cptest.Brokers{})
	ctx := context.Background()

	// Brokers listen first; the cell state then lists their raft addresses.
	nodes := make([]*transport.Node, 3)
	for i := range nodes {
		tn, err := transport.New(transport.Config{ID: replicas.ServerID(i + 1), ListenAddr: "127.0.0.1:0", Credentials: celltest.PeerCredentials(t, replicas.ServerID(i+1))})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = tn
		addr := string(tn.Addr())
		if _, err := env.Operator.AdminUpdateBroker(ctx, fmt.Sprintf("%s-b%d", cptest.Cell, i+1), api.UpdateBrokerRequest{RaftAddr: &addr}); err != nil {
			t.Fatal(err)
		}
	}
	var brokers []*broker
	for i, tn := range nodes {
		brokers = append(brokers, startBroker(t, env, i+1, tn))
	}

	tenant := env.Signup("acme", "")
	if _, err := tenant.Key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	var wt *wire.Topic
	celltest.WaitFor(t, wait, "the topic in every broker's state", func() bool {
		for _, b := range brokers {
			tp, ok := b.syncer.View().Topic(tenant.Tenant.ID, "orders")
			if !ok {
				return false
			}
			wt = tp
		}
		return true
	})
	if len(wt.Partitions) != 6 {
		t.Fatalf("topic in state: %+v", wt)
	}

	// Every partition elects, and leadership settles on the preferred
	// replica (the first listed), which placement spreads over brokers.
	leaders := map[int]int{}
	for _, p := range wt.Partitions {
		pref := p.Replicas[0]
		celltest.WaitFor(t, wait, fmt.Sprintf("partition %d led by its preferred replica %d", p.Partition, pref), func() bool {
			r, ok := brokers[pref-1].manager.Get(wt.ID, int32(p.Partition))
			return ok && r.IsLeader()
		})
		leaders[pref]++
	}
	for node := 1; node <= 3; node++ {
		if leaders[node] != 2 {
			t.Errorf("broker %d prefers %d partitions, want 2 (placement %+v)", node, leaders[node], wt.Partitions)
		}
	}

	// A produce on the leader commits on all three replicas.
	p0 := wt.Partitions[0]
	leader, _ := brokers[p0.Replicas[0]-1].manager.Get(wt.ID, 0)
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var end int64
	for i := range 3 {
		off, err := leader.Produce(pctx, celltest.Batch([]byte(fmt.Sprintf("record %d", i))))
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		end = off + 1
	}
	celltest.WaitFor(t, wait, "the records committed on all three replicas", func() bool {
		for _, b := range brokers {
			r, ok := b.manager.Get(wt.ID, 0)
			if !ok || r.HighWatermark() < end || r.Store().Log().DurableOffset() < end {
				return false
			}
		}
		return true
	})

	// Status reports the leader, epoch and offsets.
	for _, b := range brokers {
		var found bool
		for _, st := range b.manager.Status() {
			if st.TopicID == wt.ID && st.Partition == 0 {
				found = true
				if st.LeaderNode != p0.Replicas[0] || st.LeaderEpoch < 1 || st.LogEndOffset != end || st.HighWatermark != end || st.SizeBytes == 0 {
					t.Errorf("broker %d status of partition 0: %+v (leader %d, end %d)", b.node, st, p0.Replicas[0], end)
				}
			}
		}
		if !found || len(b.manager.Status()) != 6 {
			t.Errorf("broker %d reports %d partitions, partition 0 found %v", b.node, len(b.manager.Status()), found)
		}
	}

	// Deleting the topic closes every replica and deletes its data.
	if err := tenant.Key.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	celltest.WaitFor(t, wait, "every replica closed and its directory deleted", func() bool {
		for _, b := range brokers {
			if len(b.manager.Status()) != 0 {
				return false
			}
			if _, err := os.Stat(filepath.Join(b.dir, "replicas", wt.ID)); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
		return true
	})
	if _, err := leader.Produce(pctx, celltest.Batch([]byte("late"))); err == nil {
		t.Fatal("a closed replica accepted a produce")
	}
}

// viewOf builds a View through a Syncer, as a broker gets it.
func viewOf(t *testing.T, st wire.CellState) *cellview.View {
	t.Helper()
	s, err := cellview.New(cellview.Config{Cell: "c1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	st.Version, st.Cell = wire.Version, "c1"
	if err := s.Apply(st); err != nil {
		t.Fatal(err)
	}
	return s.View()
}

// A topic deleted while the broker was down: the restarted broker's first
// real state no longer lists it, so its data goes; the empty state a broker
// has before its first sync deletes nothing.
func TestOrphanedReplicaDeletedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	tn, com := nodeDeps(t, 1)
	open := func() *replicas.Manager {
		m, err := replicas.New(replicas.Config{NodeID: 1, DataDir: dir, Transport: tn, Committer: com, Raft: celltest.TestRaftConfig})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	brokers := []wire.Broker{{ID: "b1", NodeID: 1, RaftAddr: string(tn.Addr())}}
	withTopic := viewOf(t, wire.CellState{StateVersion: 1, Brokers: brokers,
		Topics: []wire.Topic{{ID: "tp_a", Name: "a", Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1}}}}}})
	ctx := context.Background()

	m := open()
	if err := m.Apply(ctx, withTopic); err != nil {
		t.Fatal(err)
	}
	r, ok := m.Get("tp_a", 0)
	if !ok {
		t.Fatal("replica not opened")
	}
	celltest.WaitFor(t, wait, "the single replica to lead", r.IsLeader)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	replicaDir := filepath.Join(dir, "tp_a", "0")
	if _, err := os.Stat(replicaDir); err != nil {
		t.Fatalf("replica data after close: %v", err)
	}

	m = open()
	t.Cleanup(func() { _ = m.Close() })
	empty := viewOf(t, wire.CellState{StateVersion: 0})
	if err := m.Apply(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(replicaDir); err != nil {
		t.Fatalf("the pre-sync empty state deleted data: %v", err)
	}
	if err := m.Apply(ctx, viewOf(t, wire.CellState{StateVersion: 2, Brokers: brokers})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tp_a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphaned topic directory: %v", err)
	}
	if len(m.Status()) != 0 {
		t.Fatalf("status after delete: %+v", m.Status())
	}
}

// nodeDeps starts what a Manager of node needs from its broker: a
// transport listening on a loopback port and a committer, both closed when
// the test ends.
func nodeDeps(t *testing.T, node int) (*transport.Node, *raftlog.Committer) {
	t.Helper()
	tn, err := transport.New(transport.Config{ID: replicas.ServerID(node), ListenAddr: "127.0.0.1:0", Credentials: celltest.PeerCredentials(t, replicas.ServerID(node))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.Close() })
	com := raftlog.NewCommitter(log.SyncFiles)
	t.Cleanup(com.Close)
	return tn, com
}
