package main

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// TestUnderReplicatedAsksEveryAssignedReplica: a partition led here is
// under-replicated when any replica the cell state assigns it is not in
// sync (partition.Replica.InSync decides, TestFollowerInSyncRule defends
// its rule), and only for the partition asked about.
func TestUnderReplicatedAsksEveryAssignedReplica(t *testing.T) {
	syncer, err := cellview.New(cellview.Config{Cell: "cell-1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.Apply(wire.CellState{Version: wire.Version, Cell: "cell-1", StateVersion: 2,
		Tenants: []wire.Tenant{{ID: "tn_1", Name: "one", Status: "active"}},
		Topics: []wire.Topic{{ID: "tp_1", TenantID: "tn_1", Name: "orders",
			Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}, {Partition: 1, Replicas: []int{1, 2, 4}}}}}}); err != nil {
		t.Fatal(err)
	}
	outOf := func(nodes ...int) func(int) bool {
		return func(n int) bool {
			for _, o := range nodes {
				if n == o {
					return false
				}
			}
			return true
		}
	}
	for _, tc := range []struct {
		name   string
		topic  string
		part   int
		inSync func(int) bool
		want   bool
	}{
		{"all in sync", "tp_1", 0, outOf(), false},
		{"a follower out of sync", "tp_1", 0, outOf(3), true},
		{"the leader's own replica out of the group", "tp_1", 0, outOf(1), true},
		{"a broker the partition is not assigned to", "tp_1", 0, outOf(4), false},
		{"the other partition's replica", "tp_1", 1, outOf(4), true},
		{"an unknown partition", "tp_1", 7, outOf(1, 2, 3), false},
		{"an unknown topic", "tp_9", 0, outOf(1, 2, 3), false},
	} {
		if got := underReplicated(syncer.View(), tc.topic, tc.part, tc.inSync); got != tc.want {
			t.Errorf("%s: under-replicated %v, want %v", tc.name, got, tc.want)
		}
	}
}
