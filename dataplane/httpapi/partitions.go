package httpapi

import (
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// Partitions are the partition replicas this broker holds: the one
// interface both front doors use (frontdoor.Partitions; the broker's
// replica manager, *partition.Replica implementing Partition).
type Partitions = frontdoor.Partitions

// Partition is one local replica (frontdoor.Partition).
type Partition = frontdoor.Partition
