package kafka

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/log"
)

// leaderNoder is how a replication layer's not-leader errors are told
// apart without this package importing it: LeaderNode is the leader's
// broker node id, ok false when unknown.
type leaderNoder interface{ LeaderNode() (node int, ok bool) }

// catalogued turns an error of the partition layer into the catalogue's
// caller-safe form. Unknown errors become Internal; their cause goes to the
// log only.
func catalogued(err error) *catalog.Error {
	var ce *catalog.Error
	var ln leaderNoder
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, ErrNotLeader), errors.As(err, &ln):
		return catalog.NotLeader.Wrap(err, "")
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return catalog.OffsetOutOfRange.Wrap(err, "")
	case errors.Is(err, log.ErrBatchTooLarge):
		return catalog.MessageTooLarge.Wrap(err, "")
	case errors.Is(err, log.ErrCorruptBatch):
		return catalog.CorruptMessage.Wrap(err, "the record batch failed its length, CRC or record-count check")
	case errors.Is(err, log.ErrInvalidMagic):
		return catalog.CorruptMessage.Wrap(err, "the record batch is not magic v2")
	case errors.Is(err, log.ErrControlBatch):
		return catalog.CorruptMessage.Wrap(err, "clients may not produce control batches")
	case errors.Is(err, context.DeadlineExceeded):
		return catalog.RequestTimedOut.Wrap(err, "")
	case errors.Is(err, context.Canceled):
		return catalog.Unavailable.Wrap(err, "the broker is shutting down")
	default:
		return catalog.Internal.Wrap(err, "")
	}
}

// errCode is the Kafka error code and the caller-safe message of err; code
// 0 and no message for nil.
func errCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	ce := catalogued(err)
	msg := ce.Message
	if msg == "" {
		msg = ce.Entry.Description
	}
	return ce.Entry.KafkaCode, &msg
}

// entryCode is the Kafka code and message of a catalogue entry.
func entryCode(e *catalog.Entry, msg string) (int16, *string) {
	if msg == "" {
		msg = e.Description
	}
	return e.KafkaCode, &msg
}
