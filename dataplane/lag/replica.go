package lag

import (
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// ReplicaPartition is a local replica seen as a Partition: its high
// watermark (a follower's trails the leader's by at most one Raft commit
// round) and its own copy of the log.
func ReplicaPartition(r *partition.Replica) Partition {
	return replicaPartition{r: r, Log: r.Store().Log()}
}

type replicaPartition struct {
	r *partition.Replica
	*dlog.Log
}

func (p replicaPartition) HighWatermark() int64 { return p.r.HighWatermark() }

// LogStartOffset is the replicated log start (retention and DeleteRecords,
// the same on every replica after the same entries), not the first offset
// the segment files still hold: a replica deletes files later, and never
// its active segment, so they may begin below it.
func (p replicaPartition) LogStartOffset() int64 { return p.r.LogStartOffset() }
