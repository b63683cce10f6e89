package usage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// Meter names, as the ledger stores them.
const (
	BytesIn     = "bytes_in"
	BytesOut    = "bytes_out"
	MessagesIn  = "messages_in"
	MessagesOut = "messages_out"
)

// RecordVersion is the version of Record's encoding.
const RecordVersion = 1

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
	// Batches are the produced batches, each once per count: the ledger
	// counts a batch (topic, partition, base offset) once, so a retry
	// that the partition answered as a duplicate of a batch another
	// leader already counted adds nothing.
	Batches []Batch `json:"batches,omitempty"`
}

// Batch is one appended batch: its bytes and records are bytes_in and
// messages_in.
type Batch struct {
	Tenant    string `json:"tenant"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Base      int64  `json:"base"`
	Hour      int64  `json:"hour"`
	Bytes     int64  `json:"bytes"`
	Messages  int64  `json:"messages"`
}

// Entry is one counter of a Record.
type Entry struct {
	Tenant string `json:"tenant"`
	// Topic is the topic id; empty for usage not attributed to one topic
	// (an HTTP group fetch reads many).
	Topic string `json:"topic,omitempty"`
	Meter string `json:"meter"`
	// Hour is the start of the hour the usage happened in, unix seconds.
	Hour  int64 `json:"hour"`
	Value int64 `json:"value"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeaderLen is the size of a magic v2 record batch header.
const batchHeaderLen = 61

// EncodeBatch returns an uncompressed Kafka record batch (magic v2, no
// producer id, base offset 0) holding r as its one record's value, keyed
// by its source, timestamped r.At: the partition stamps base offset and
// leader epoch.
func EncodeBatch(r Record) ([]byte, error) {
	value, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode usage record: %w", err)
	}
	key := fmt.Appendf(nil, "%d/%s/%d", r.Node, r.Boot, r.Seq)
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, int64(len(key)))
	rec = append(rec, key...)
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // no headers
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(rec)+binary.MaxVarintLen64)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], ^uint32(0)) // partition leader epoch, stamped by the partition
	b[16] = 2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], 0) // last offset delta
	be.PutUint64(b[27:], uint64(r.At))
	be.PutUint64(b[35:], uint64(r.At))
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	be.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	be.PutUint32(b[57:], 1)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}

// ErrBadBatch is returned by EachValue for bytes that are not whole,
// valid, uncompressed record batches.
var ErrBadBatch = errors.New("malformed usage batch")

// EachValue calls fn with the offset and value of every record of the
// whole batches laid end to end in b (as a partition fetch returns them),
// in offset order, and returns the offset after the last batch (-1 for
// none). Control batches are skipped; compressed batches are refused
// (flushers never write any). A trailing partial batch is an error.
func EachValue(b []byte, fn func(offset int64, value []byte) error) (next int64, err error) {
	be := binary.BigEndian
	next = -1
	for len(b) > 0 {
		if len(b) < batchHeaderLen {
			return next, fmt.Errorf("%w: %d bytes left, short of a header", ErrBadBatch, len(b))
		}
		n := int64(be.Uint32(b[8:])) + 12
		if n < batchHeaderLen || n > int64(len(b)) {
			return next, fmt.Errorf("%w: batch length %d with %d bytes left", ErrBadBatch, n, len(b))
		}
		batch := b[:n]
		b = b[n:]
		base := int64(be.Uint64(batch[0:]))
		if batch[16] != 2 {
			return next, fmt.Errorf("%w: magic %d", ErrBadBatch, batch[16])
		}
		if crc32.Checksum(batch[21:], castagnoli) != be.Uint32(batch[17:]) {
			return next, fmt.Errorf("%w: crc mismatch at offset %d", ErrBadBatch, base)
		}
		attrs := be.Uint16(batch[21:])
		lastDelta := int64(be.Uint32(batch[23:]))
		if base < 0 || lastDelta < 0 || base > (1<<62) {
			return next, fmt.Errorf("%w: offsets %d+%d", ErrBadBatch, base, lastDelta)
		}
		next = base + lastDelta + 1
		if attrs&0x20 != 0 { // control batch
			continue
		}
		if attrs&0x7 != 0 {
			return next, fmt.Errorf("%w: compressed batch at offset %d", ErrBadBatch, base)
		}
		count := int(int32(be.Uint32(batch[57:])))
		rd := batch[batchHeaderLen:]
		for i := 0; i < count; i++ {
			ln, k := binary.Varint(rd)
			if k <= 0 || ln < 0 || ln > int64(len(rd)-k) {
				return next, fmt.Errorf("%w: record %d of batch at %d: bad length", ErrBadBatch, i, base)
			}
			rec := rd[k : k+int(ln)]
			rd = rd[k+int(ln):]
			delta, value, err := parseRecord(rec)
			if err != nil {
				return next, fmt.Errorf("%w: record %d of batch at %d: %w", ErrBadBatch, i, base, err)
			}
			if err := fn(base+delta, value); err != nil {
				return next, err
			}
		}
	}
	return next, nil
}

// parseRecord reads one record body (after its length): its offset delta
// and value.
func parseRecord(b []byte) (int64, []byte, error) {
	if len(b) < 1 {
		return 0, nil, errors.New("empty record")
	}
	b = b[1:] // attributes
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	field := func() ([]byte, bool) {
		n, ok := varint()
		if !ok || n < -1 || n > int64(len(b)) {
			return nil, false
		}
		if n < 0 {
			return nil, true
		}
		v := b[:n:n]
		b = b[n:]
		return v, true
	}
	if _, ok := varint(); !ok {
		return 0, nil, errors.New("bad timestamp delta")
	}
	delta, ok := varint()
	if !ok || delta < 0 {
		return 0, nil, errors.New("bad offset delta")
	}
	if _, ok := field(); !ok {
		return 0, nil, errors.New("bad key")
	}
	value, ok := field()
	if !ok {
		return 0, nil, errors.New("bad value")
	}
	return delta, value, nil
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
