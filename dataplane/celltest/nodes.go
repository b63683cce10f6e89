package celltest

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// NodeOf maps a cell broker's server id ("b0") to its node id (1).
func NodeOf(id raft.ServerID) (int, bool) {
	var b int
	if _, err := fmt.Sscanf(string(id), "b%d", &b); err != nil {
		return -1, false
	}
	return b + 1, true
}

// NodeReplica is a replica whose Leader answers in node ids: the cell
// opens its replicas with the default decimal NodeID, which does not know
// its brokers' names, while the Kafka listener and the group coordinator
// speak node ids.
type NodeReplica struct{ *partition.Replica }

// Leader is the leader's node id, if this replica knows one.
func (r NodeReplica) Leader() (int, bool) {
	if r.IsLeader() {
		return NodeOf(r.ID())
	}
	id, _ := r.LeaderID()
	if id == "" || id == r.ID() {
		return -1, false
	}
	return NodeOf(id)
}
