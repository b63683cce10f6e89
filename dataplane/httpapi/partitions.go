package httpapi

import (
	"context"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Partitions are the partition replicas this broker holds (the broker's
// replica manager; *partition.Replica implements Partition).
type Partitions interface {
	// Get returns the local replica of a topic's partition, if this broker
	// holds one.
	Get(topicID string, partition int32) (Partition, bool)
}

// Partition is one local replica, as the Kafka front door uses it (see
// kafka.Partition for the full contract).
type Partition interface {
	// Produce appends one validated client batch and returns its base
	// offset once committed; a not-leader error has a LeaderNode method.
	Produce(ctx context.Context, batch []byte) (baseOffset int64, err error)
	// Fetch returns committed whole batches from the one holding offset,
	// and the high watermark.
	Fetch(offset int64, maxBytes int32) (s log.Slice, hw int64, err error)
	HighWatermark() int64
	LogStartOffset() int64
	// Leader is the serving leader's node id; ok is false while there is
	// none.
	Leader() (node int, ok bool)
	// OffsetForTimestamp returns the first committed offset whose batch
	// holds a timestamp ≥ ts.
	OffsetForTimestamp(ts int64) (offset int64, found bool, err error)
	// Watch sends on wake (without blocking) once the high watermark is
	// above hw or leadership changes.
	Watch(hw int64, wake chan<- struct{}) (cancel func())
}
