package main

import (
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// underReplicated reports whether a partition this broker leads has an
// assigned replica that is not in sync (inSync, partition.Replica.InSync:
// not a voter of the group, on a broker found down, or a follower that has
// gone partition.ReplicaLagMax without the leader's whole log). Kafka's
// UnderReplicatedPartitions: fewer in-sync replicas than assigned.
func underReplicated(v *cellview.View, topicID string, part int, inSync func(node int) bool) bool {
	t, ok := v.TopicByID(topicID)
	if !ok {
		return false
	}
	for _, p := range t.Partitions {
		if p.Partition != part {
			continue
		}
		for _, n := range p.Replicas {
			if !inSync(n) {
				return true
			}
		}
	}
	return false
}
