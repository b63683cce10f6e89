package transport

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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

// TestMembersAreNotReadPerRPC: checking an RPC against its group's
// configuration does not ask Raft (a round trip through its busy main
// loop) for every RPC: the configuration is read once and refreshed in the
// background, and a change is seen within membersFresh.
func TestMembersAreNotReadPerRPC(t *testing.T) {
	three := []raft.Server{{ID: "1"}, {ID: "2"}, {ID: "3"}}
	ra := &countingRaft{}
	ra.servers.Store(&three)
	members := raftMembers(func() configurationGetter { return ra }, nil)
	for range 1000 {
		if got := members(); len(got) != 3 {
			t.Fatalf("members: %v", got)
		}
	}
	if n := ra.calls.Load(); n > 2 {
		t.Fatalf("1,000 RPCs asked Raft for its configuration %d times", n)
	}
	two := three[:2]
	ra.servers.Store(&two)
	deadline := time.Now().Add(10 * membersFresh)
	for len(members()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a removed member was still admitted after %v", 10*membersFresh)
		}
		time.Sleep(membersFresh / 10)
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
