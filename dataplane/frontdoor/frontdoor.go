// Package frontdoor is what the broker's two front doors, the Kafka
// listener (dataplane/kafka) and the HTTP data API (dataplane/httpapi),
// share about the partitions behind them: the one Partition interface both
// serve from, the not-leader error and how the partition layer's errors map
// onto the error catalogue, so that a client
// gets the same code for the same failure through either door. It imports
// only contract/catalog and the data plane's log and records packages; the
// front doors import it.
package frontdoor

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
)

// ErrNotLeader is matched by every *NotLeaderError.
var ErrNotLeader = errors.New("this replica does not lead the partition")

// NotLeaderError says that a replica does not lead its partition, and who
// does, when that is known.
type NotLeaderError struct {
	Leader int // broker node id; -1 when unknown
	Epoch  int32
}

func (e *NotLeaderError) Error() string {
	if e.Leader < 0 {
		return fmt.Sprintf("not the leader (epoch %d, leader unknown)", e.Epoch)
	}
	return fmt.Sprintf("not the leader (epoch %d, leader is node %d)", e.Epoch, e.Leader)
}

// LeaderNode is the leader's node id, ok false when unknown.
func (e *NotLeaderError) LeaderNode() (int, bool) { return e.Leader, e.Leader >= 0 }

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// LeaderNoder is how a replication layer's not-leader errors are told
// apart without importing it (dataplane/partition's implement it):
// LeaderNode is the leader's broker node id, ok false when unknown.
type LeaderNoder interface{ LeaderNode() (node int, ok bool) }

// Catalogued turns an error of the partition layer into the catalogue's
// caller-safe form. Unknown errors become Internal; their cause goes to the
// log only.
func Catalogued(err error) *catalog.Error {
	var ce *catalog.Error
	var ln LeaderNoder
	switch {
	case errors.As(err, &ce):
		return ce
	case noQuorum(err):
		return catalog.NotEnoughReplicas.Wrap(err, noQuorumMessage)
	case errors.Is(err, ErrNotLeader), errors.As(err, &ln):
		return catalog.NotLeader.Wrap(err, "")
	}
	for _, c := range causes {
		if errors.Is(err, c.err) {
			return c.entry.Wrap(err, c.msg)
		}
	}
	return catalog.Internal.Wrap(err, "")
}

// causes are the partition layer's sentinel errors, each with the
// catalogue entry and message (empty: the entry's description) the caller
// gets for it; the first that matches wins.
var causes = []struct {
	err   error
	entry *catalog.Entry
	msg   string
}{
	{log.ErrOffsetOutOfRange, catalog.OffsetOutOfRange, ""},
	{log.ErrBatchTooLarge, catalog.MessageTooLarge, ""},
	{log.ErrKeylessRecord, catalog.InvalidRecord, "the topic is compacted (cleanup.policy includes compact): every record needs a key, and this batch has a record without one; nothing of it was appended"},
	{log.ErrCorruptBatch, catalog.CorruptMessage, "the record batch failed its length, CRC or record-count check"},
	{log.ErrInvalidMagic, catalog.CorruptMessage, "the record batch is not magic v2"},
	{log.ErrControlBatch, catalog.CorruptMessage, "clients may not produce control batches"},
	{records.ErrCorrupt, catalog.CorruptMessage, "a record in the batch is malformed"},
	{context.DeadlineExceeded, catalog.RequestTimedOut, ""},
	{context.Canceled, catalog.Unavailable, "the broker is shutting down or the client went away"},
}

// noQuorum reports whether err is a not-leader error of a partition whose
// majority is gone (dataplane/partition's NotLeaderError.NoQuorum), as
// opposed to a leader moving: the caller gets not_enough_replicas (Kafka
// NOT_ENOUGH_REPLICAS, retriable) instead of not_leader.
func noQuorum(err error) bool {
	var nq interface{ NoQuorum() bool }
	return errors.As(err, &nq) && nq.NoQuorum()
}
