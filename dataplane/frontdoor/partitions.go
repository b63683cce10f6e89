package frontdoor

import (
	"context"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Partitions are the partition replicas this broker holds, as both front
// doors see them. The replication layer implements it (tenantd adapts the
// broker's replica manager once, for both doors); the front doors only
// read, produce and move the log start through it.
type Partitions interface {
	// Get returns the local replica of a topic's partition, if this broker
	// holds one.
	Get(topicID string, partition int32) (Partition, bool)
}

// Partition is one local replica of a partition. All methods are safe for
// concurrent use.
type Partition interface {
	// Produce appends one client record batch (already checked by the
	// caller with log.CheckClientBatchFraming) and returns once it is
	// committed (a majority of replicas has it on stable storage), with its
	// base offset. It fails with a not-leader error (LeaderNoder) when
	// this replica does not lead, with log.ErrBatchTooLarge when the batch
	// is larger than the partition's max.message.bytes, and with ctx's
	// error when ctx ends first; the batch may then still commit later.
	// Produce owns batch from the call on: it may stamp it in place and
	// keep it after returning.
	Produce(ctx context.Context, batch []byte) (baseOffset int64, err error)
	// Fetch returns committed batches from the one containing offset: whole
	// batches only, at least one when any is committed at or after offset,
	// more while they fit in maxBytes, none at or above the high watermark.
	// It also returns the high watermark the read was bounded by. Offsets
	// below LogStartOffset or above the log end give log.ErrOffsetOutOfRange;
	// an offset at or past the high watermark gives an empty Slice.
	Fetch(offset int64, maxBytes int32) (s log.Slice, hw int64, err error)
	// HighWatermark is the offset below which everything is committed.
	HighWatermark() int64
	// LogStartOffset is the first offset still retained.
	LogStartOffset() int64
	// LeaderEpoch is the current leader epoch (the Raft term).
	LeaderEpoch() int32
	// Leader is the current leader's broker node id; ok is false while
	// there is none.
	Leader() (node int, ok bool)
	// InSync reports whether the replica on broker node counts as in
	// sync (Kafka's ISR), as far as this broker can tell.
	InSync(node int) bool
	// Offline reports whether the replica on broker node is on a broker
	// this broker finds down (Kafka's offline replicas).
	Offline(node int) bool
	// OffsetForTimestamp returns the first committed offset whose batch
	// holds a timestamp ≥ ts; found is false if there is none.
	OffsetForTimestamp(ts int64) (offset int64, found bool, err error)
	// EpochEnd answers OffsetForLeaderEpoch: for a consumer whose last
	// record had leader epoch epoch, the largest epoch ≤ epoch in this
	// log and the offset where it ends (the next epoch's first offset, or
	// the high watermark for the current epoch). ok is false when the log
	// knows no such epoch.
	EpochEnd(epoch int32) (leaderEpoch int32, endOffset int64, ok bool, err error)
	// DeleteRecords moves the log start offset forward to offset (-1:
	// the high watermark), replicated, and returns the new log start once
	// committed. An offset above the high watermark fails with
	// log.ErrOffsetOutOfRange and changes nothing; one at or below the
	// log start changes nothing. Only the serving leader answers.
	DeleteRecords(ctx context.Context, offset int64) (logStart int64, err error)
	// Watch arranges a non-blocking send on wake once the high watermark
	// is above hw, or leadership changes; it sends at once if that is
	// already so. cancel removes the arrangement and may be called more
	// than once.
	Watch(hw int64, wake chan<- struct{}) (cancel func())
}

// Submitter is a Partition whose Produce comes in two steps (the
// replication layer's does): Submit checks the batch and hands it to the
// log without waiting for the commit, and returns a func that waits for
// Produce's outcome, which the caller must call exactly once. Batches
// submitted one after another from one goroutine are appended in that
// order, so a front door may submit a connection's next request before
// the previous one has committed and still keep the connection's order.
type Submitter interface {
	Submit(ctx context.Context, batch []byte) (wait func() (baseOffset int64, err error))
}
