package usage

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/contract/usagewire"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
)

// Meter names, as the ledger stores them.
const (
	BytesIn     = usagewire.BytesIn
	BytesOut    = usagewire.BytesOut
	MessagesIn  = usagewire.MessagesIn
	MessagesOut = usagewire.MessagesOut
)

// RecordVersion is the version of Record's encoding: 2 replaced version
// 1's produced batches with produce ranges.
const RecordVersion = 2

// Record is one flush of one broker's counters: the value of one Kafka
// record in a usage partition, as JSON.
type Record struct {
	Version int `json:"v"`
	// Node, Boot and Seq name the flush: the broker's node id, a random id
	// of the broker process, and the flush's sequence number in that
	// process (from 1). The ledger applies a (node, boot, seq) once.
	Node int    `json:"node"`
	Boot string `json:"boot"`
	Seq  uint64 `json:"seq"`
	// At is when the flush was made, unix milliseconds.
	At      int64   `json:"at"`
	Entries []Entry `json:"entries"`
	// Ranges are produce ranges of partitions this broker led: the
	// ledger keeps, per (topic, partition, hour), the one with the
	// highest end offset, so a range recorded again (by a new leader, or
	// a retried flush) counts once.
	Ranges []Range `json:"ranges,omitempty"`
}

// Range is a partition's closed produce range (usagewire.Range).
type Range = usagewire.Range

// Entry is one counter of a Record (usagewire.Entry).
type Entry = usagewire.Entry

// EncodeBatch returns an uncompressed Kafka record batch (records.Build:
// magic v2, no producer id, base offset 0) holding r as its one record's
// value, keyed by its source, timestamped r.At: the partition stamps base
// offset and leader epoch.
func EncodeBatch(r Record) ([]byte, error) {
	value, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode usage record: %w", err)
	}
	key := fmt.Appendf(nil, "%d/%s/%d", r.Node, r.Boot, r.Seq)
	return records.Build([]records.Record{{Timestamp: r.At, Key: key, Value: value}}, records.NoProducer), nil
}

// ErrBadBatch is returned by EachValue for bytes that are not whole,
// valid record batches.
var ErrBadBatch = errors.New("malformed usage batch")

// maxUsageBatch bounds what one usage batch may decompress to: flushers
// write uncompressed batches far below the usage partitions' limit.
const maxUsageBatch = 4 << 20

// EachValue calls fn with the offset and value of every record of the
// whole batches laid end to end in b (as a partition fetch returns them),
// in offset order, and returns the offset after the last batch (-1 for
// none). Each batch's CRC is checked, then records.Decode reads it;
// control batches are skipped. Batches must follow one another in offset
// order, as in a partition. A trailing partial batch is an error.
func EachValue(b []byte, fn func(offset int64, value []byte) error) (next int64, err error) {
	next = -1
	for len(b) > 0 {
		h, err := log.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) {
			return next, fmt.Errorf("%w: %d bytes left, short of a batch", ErrBadBatch, len(b))
		}
		batch := b[:h.Size()]
		b = b[h.Size():]
		if _, err := log.ValidateBatch(batch); err != nil {
			return next, fmt.Errorf("%w: batch at offset %d: %w", ErrBadBatch, h.BaseOffset, err)
		}
		if h.BaseOffset < next {
			return next, fmt.Errorf("%w: batch at offset %d after offset %d", ErrBadBatch, h.BaseOffset, next)
		}
		recs, n, err := records.Decode(batch, 0, maxUsageBatch)
		if err != nil {
			return next, fmt.Errorf("%w: batch at offset %d: %w", ErrBadBatch, h.BaseOffset, err)
		}
		next = n
		for _, r := range recs {
			if err := fn(r.Offset, r.Value); err != nil {
				return next, err
			}
		}
	}
	return next, nil
}

// Decode parses a record value EachValue returned.
func Decode(value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return Record{}, fmt.Errorf("decode usage record: %w", err)
	}
	if r.Version != RecordVersion {
		return Record{}, fmt.Errorf("decode usage record: version %d, want %d", r.Version, RecordVersion)
	}
	return r, nil
}
