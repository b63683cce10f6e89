package frontdoor

import "github.com/sluicehq/sluice/contract/catalog"

// NoLeader is the error a front door answers for a partition that serves
// no leader on this broker before it tries to append: not_enough_replicas
// (Kafka NOT_ENOUGH_REPLICAS, retriable) when p, the local replica, finds
// its group's majority gone, so that a client tells an outage that lasts
// until brokers return from a leader moving; not_leader otherwise, with
// msg (empty: the catalogue's description). p may be nil: no local
// replica.
func NoLeader(p Partition, msg string) *catalog.Error {
	if PartitionNoQuorum(p) {
		return catalog.NotEnoughReplicas.New(noQuorumMessage)
	}
	return catalog.NotLeader.New(msg)
}

// PartitionNoQuorum reports whether p (nil: none) is a replica whose
// group has lost its majority (dataplane/partition's Replica.NoQuorum).
func PartitionNoQuorum(p Partition) bool {
	nq, ok := p.(interface{ NoQuorum() bool })
	return ok && nq.NoQuorum()
}

const noQuorumMessage = "a majority of the partition's replicas is unreachable, so it has no leader until they return; retry"
