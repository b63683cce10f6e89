package main

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// underReplicated reports whether a partition this broker (node self)
// leads has fewer live, caught-up replicas than the cell state assigns it:
// an assigned replica's broker answers no transport probe, the partition's
// Raft configuration lacks an assigned node as a voter, or an assigned
// follower answers but has not held the leader's whole log for
// partition.ReplicaLagMax (outOfSync, partition.Replica.FollowerOutOfSync).
func underReplicated(v *cellview.View, topicID string, part, self int, node *transport.Node, config func() raft.ConfigurationFuture, outOfSync func(raft.ServerID) time.Duration) bool {
	t, ok := v.TopicByID(topicID)
	if !ok {
		return false
	}
	var assigned []int
	for _, p := range t.Partitions {
		if p.Partition == part {
			assigned = p.Replicas
		}
	}
	voters := map[raft.ServerID]bool{}
	if f := config(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters[s.ID] = true
			}
		}
	}
	for _, n := range assigned {
		id := replicas.ServerID(n)
		if len(voters) > 0 && !voters[id] {
			return true
		}
		if n == self {
			continue
		}
		if node != nil && node.PeerDown(id) {
			return true
		}
		if outOfSync(id) > partition.ReplicaLagMax {
			return true
		}
	}
	return false
}
