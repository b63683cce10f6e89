package transport

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// countingRaft answers GetConfiguration with servers and counts the calls.
type countingRaft struct {
	calls   atomic.Int64
	servers atomic.Pointer[[]raft.Server]
}

func (c *countingRaft) GetConfiguration() raft.ConfigurationFuture {
	c.calls.Add(1)
	return configFuture{servers: *c.servers.Load()}
}

type configFuture struct{ servers []raft.Server }

func (f configFuture) Error() error  { return nil }
func (f configFuture) Index() uint64 { return 1 }
func (f configFuture) Configuration() raft.Configuration {
	return raft.Configuration{Servers: f.servers}
}

// TestMembersFollowConfiguration: every RPC is checked against the
// group's configuration as it is now, so a removed member is refused from
// its next RPC; before Raft has a configuration the initial servers are
// admitted.
func TestMembersFollowConfiguration(t *testing.T) {
	three := []raft.Server{{ID: "1"}, {ID: "2"}, {ID: "3"}}
	ra := &countingRaft{}
	ra.servers.Store(&three)
	members := raftMembers(func() configurationGetter { return ra }, nil)
	if got := members(); len(got) != 3 {
		t.Fatalf("members: %v", got)
	}
	two := three[:2]
	ra.servers.Store(&two)
	if got := members(); len(got) != 2 {
		t.Fatalf("members after a removal: %v, want two", got)
	}

	// Before Raft has a configuration (a new replica waiting for its
	// leader), the initial servers are admitted.
	empty := []raft.Server{}
	ra2 := &countingRaft{}
	ra2.servers.Store(&empty)
	if got := raftMembers(func() configurationGetter { return ra2 }, three)(); len(got) != 3 {
		t.Fatalf("members before a configuration: %v, want the initial three", got)
	}
	if got := raftMembers(func() configurationGetter { return nil }, three)(); len(got) != 3 {
		t.Fatalf("members before Raft starts: %v, want the initial three", got)
	}
}

// gatedStore is a log store whose StoreLogs blocks while gate is open.
type gatedStore struct {
	*raft.InmemStore
	gate    atomic.Pointer[chan struct{}]
	blocked chan struct{} // receives when a StoreLogs starts waiting
}

func (s *gatedStore) StoreLogs(logs []*raft.Log) error {
	if g := s.gate.Load(); g != nil {
		s.blocked <- struct{}{}
		<-*g
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *gatedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// TestMembersReadWhileRaftStores: reading the configuration an RPC is
// checked against does not wait for Raft's main loop, here stuck in a
// leader's StoreLogs; otherwise every incoming heartbeat would wait for
// the disk.
func TestMembersReadWhileRaftStores(t *testing.T) {
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.HeartbeatTimeout, conf.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard})
	store := &gatedStore{InmemStore: raft.NewInmemStore(), blocked: make(chan struct{}, 1)}
	addr, tr := raft.NewInmemTransport("a")
	r, err := raft.NewRaft(conf, &countFSM{}, store, raft.NewInmemStore(), raft.NewInmemSnapshotStore(), tr)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	t.Cleanup(func() {
		if store.gate.Load() != nil {
			close(gate)
		}
		_ = r.Shutdown().Error()
	})
	self := []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: addr}}
	if err := r.BootstrapCluster(raft.Configuration{Servers: self}).Error(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "single voter elected", func() bool { return r.State() == raft.Leader })
	if err := r.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}

	store.gate.Store(&gate)
	f := r.Apply([]byte("x"), 0)
	<-store.blocked // the main loop is now inside StoreLogs
	members := RaftMembers(func() *raft.Raft { return r }, nil)
	done := make(chan []raft.Server, 1)
	go func() { done <- members() }()
	select {
	case got := <-done:
		if len(got) != 1 || got[0].ID != "a" {
			t.Fatalf("members: %v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reading the members waited for Raft's StoreLogs")
	}
	store.gate.Store(nil)
	close(gate)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
}
