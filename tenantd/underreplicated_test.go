package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

type configFuture struct{ c raft.Configuration }

func (f configFuture) Error() error                      { return nil }
func (f configFuture) Index() uint64                     { return 1 }
func (f configFuture) Configuration() raft.Configuration { return f.c }

// TestUnderReplicatedCountsOutOfSync: a partition led here is
// under-replicated when an assigned replica is not a voter, or when a
// follower that answers has not held the leader's whole log for longer
// than Kafka's replica.lag.time.max.ms (30 s); a follower out of sync
// for less is in sync.
func TestUnderReplicatedCountsOutOfSync(t *testing.T) {
	syncer, err := cellview.New(cellview.Config{Cell: "cell-1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.Apply(wire.CellState{Version: wire.Version, Cell: "cell-1", StateVersion: 2,
		Tenants: []wire.Tenant{{ID: "tn_1", Name: "one", Status: "active"}},
		Topics: []wire.Topic{{ID: "tp_1", TenantID: "tn_1", Name: "orders",
			Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}}}}}); err != nil {
		t.Fatal(err)
	}
	voters := func(nodes ...int) func() raft.ConfigurationFuture {
		var c raft.Configuration
		for _, n := range nodes {
			c.Servers = append(c.Servers, raft.Server{ID: replicas.ServerID(n), Suffrage: raft.Voter})
		}
		return func() raft.ConfigurationFuture { return configFuture{c} }
	}
	outOfSync := func(node int, d time.Duration) func(raft.ServerID) time.Duration {
		return func(id raft.ServerID) time.Duration {
			if id == replicas.ServerID(node) {
				return d
			}
			return 0
		}
	}
	for _, tc := range []struct {
		name   string
		config func() raft.ConfigurationFuture
		sync   func(raft.ServerID) time.Duration
		want   bool
	}{
		{"all in sync", voters(1, 2, 3), outOfSync(3, 0), false},
		{"a follower 29 s out of sync", voters(1, 2, 3), outOfSync(3, 29*time.Second), false},
		{"a follower 31 s out of sync", voters(1, 2, 3), outOfSync(3, 31*time.Second), true},
		{"an assigned replica not a voter", voters(1, 2), outOfSync(3, 0), true},
		{"the leader itself is never out of sync", voters(1, 2, 3), outOfSync(1, time.Hour), false},
	} {
		if got := underReplicated(syncer.View(), "tp_1", 0, 1, nil, tc.config, tc.sync); got != tc.want {
			t.Errorf("%s: under-replicated %v, want %v", tc.name, got, tc.want)
		}
	}
}
