package records

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/dataplane/log"
)

// ErrCorrupt is matched by every decoding failure.
var ErrCorrupt = errors.New("corrupt record batch")

// DefaultMaxBatchBytes bounds what one batch may decompress to when Decode
// is given no bound.
const DefaultMaxBatchBytes = 64 << 20

const (
	attrTimestampType = 0x08 // LogAppendTime: every record has the batch's max timestamp
)

// Decode returns the records with offsets at or above from of data, a run
// of whole magic-v2 batches as a partition's Fetch returns them, and the
// offset after the last batch (where the next read starts). Control
// batches are skipped. maxBatch bounds each batch's decompressed size
// (DefaultMaxBatchBytes when ≤ 0), so a small compressed batch cannot make
// the broker allocate without limit. Decode never panics on any input; a
// failure wraps ErrCorrupt (or ErrTooLarge).
func Decode(data []byte, from int64, maxBatch int) (recs []Record, next int64, err error) {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatchBytes
	}
	next = from
	for len(data) > 0 {
		h, err := log.ParseHeader(data)
		if err != nil {
			return recs, next, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if h.Size() > int64(len(data)) {
			return recs, next, fmt.Errorf("%w: batch at offset %d claims %d bytes, %d left", ErrCorrupt, h.BaseOffset, h.Size(), len(data))
		}
		batch := data[:h.Size()]
		data = data[h.Size():]
		if h.NumRecords < 0 || h.LastOffsetDelta < 0 {
			return recs, next, fmt.Errorf("%w: batch at offset %d has %d records", ErrCorrupt, h.BaseOffset, h.NumRecords)
		}
		next = max(next, h.NextOffset())
		if h.IsControl() || h.LastOffset() < from {
			continue
		}
		body, err := decompress(batch[log.HeaderSize:], h.Compression(), maxBatch)
		if err != nil {
			return recs, next, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
		recs, err = appendRecords(recs, body, h, from)
		if err != nil {
			return recs, next, err
		}
	}
	return recs, next, nil
}

// appendRecords parses the n records of one batch's (decompressed) body.
func appendRecords(recs []Record, body []byte, h log.Header, from int64) ([]Record, error) {
	r := reader{b: body}
	for i := int32(0); i < h.NumRecords; i++ {
		size := r.varint()
		if r.err != nil || size < 0 || size > int64(len(r.b)) {
			return recs, fmt.Errorf("%w: batch at offset %d: record %d has a bad length", ErrCorrupt, h.BaseOffset, i)
		}
		rr := reader{b: r.b[:size]}
		r.b = r.b[size:]
		rec, err := rr.record(h)
		if err != nil {
			return recs, fmt.Errorf("%w: batch at offset %d: record %d: %w", ErrCorrupt, h.BaseOffset, i, err)
		}
		if rec.Offset >= from {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a varint length and that many bytes; -1 is null.
func (r *reader) bytes() []byte {
	n := r.varint()
	switch {
	case r.err != nil:
		return nil
	case n == -1:
		return nil
	case n < -1 || n > int64(len(r.b)):
		r.err = errShort
		return nil
	}
	v := make([]byte, n)
	copy(v, r.b)
	r.b = r.b[n:]
	return v
}

func (r *reader) record(h log.Header) (Record, error) {
	var rec Record
	if len(r.b) < 1 {
		return rec, errShort
	}
	r.b = r.b[1:] // attributes: unused
	tsDelta := r.varint()
	offDelta := r.varint()
	rec.Key = r.bytes()
	rec.Value = r.bytes()
	nh := r.varint()
	if r.err != nil {
		return rec, r.err
	}
	if nh < 0 || nh > int64(len(r.b)) {
		return rec, fmt.Errorf("%d headers", nh)
	}
	if nh > 0 {
		rec.Headers = make([]Header, 0, nh)
	}
	for j := int64(0); j < nh; j++ {
		k := r.bytes()
		if r.err == nil && k == nil {
			return rec, errors.New("null header key")
		}
		v := r.bytes()
		rec.Headers = append(rec.Headers, Header{Key: string(k), Value: v})
	}
	if r.err != nil {
		return rec, r.err
	}
	if offDelta < 0 || offDelta > int64(h.LastOffsetDelta) {
		return rec, fmt.Errorf("offset delta %d outside the batch's %d", offDelta, h.LastOffsetDelta)
	}
	rec.Offset = h.BaseOffset + offDelta
	rec.Timestamp = h.FirstTimestamp + tsDelta
	if h.Attributes&attrTimestampType != 0 {
		rec.Timestamp = h.MaxTimestamp
	}
	return rec, nil
}
