package kafka

import (
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// Partitions are the partition replicas this broker holds: the one
// interface both front doors use (frontdoor.Partitions).
type Partitions = frontdoor.Partitions

// Partition is one local replica of a partition (frontdoor.Partition).
type Partition = frontdoor.Partition

// ErrNotLeader is matched by every *NotLeaderError.
var ErrNotLeader = frontdoor.ErrNotLeader

// NotLeaderError says that a replica does not lead its partition, and who
// does, when that is known (the front doors' one not-leader error).
type NotLeaderError = frontdoor.NotLeaderError
