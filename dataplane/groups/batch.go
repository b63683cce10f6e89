package groups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// kv is one record of an offsets partition: a key and a value (nil = a
// tombstone).
type kv struct {
	key, value []byte
}

// batchHeaderLen is the size of a magic v2 record batch header.
const batchHeaderLen = 61

// makeBatch builds an uncompressed Kafka record batch (magic v2, no
// producer id, base offset 0) of recs, timestamped ms, as a client would
// produce it: the partition stamps base offset and leader epoch.
func makeBatch(ms int64, recs []kv) []byte {
	b := make([]byte, batchHeaderLen, batchHeaderLen+64*len(recs))
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, int64(len(r.key)))
		rec = append(rec, r.key...)
		if r.value == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.value)))
			rec = append(rec, r.value...)
		}
		rec = binary.AppendVarint(rec, 0) // no headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], ^uint32(0)) // partition leader epoch, stamped by the partition
	b[16] = 2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], uint32(len(recs)-1))
	be.PutUint64(b[27:], uint64(ms))
	be.PutUint64(b[35:], uint64(ms))
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	be.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	be.PutUint32(b[57:], uint32(len(recs)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

var errBadBatch = errors.New("malformed offsets batch")

// eachRecord calls fn with every record of the whole batches laid end to
// end in b (as a partition fetch returns them), in offset order, and
// returns the offset after the last batch. Control batches are skipped;
// compressed batches are refused (the coordinator never writes any).
func eachRecord(b []byte, fn func(offset int64, r kv) error) (next int64, err error) {
	be := binary.BigEndian
	next = -1
	for len(b) > 0 {
		if len(b) < batchHeaderLen {
			return next, fmt.Errorf("%w: %d bytes left, short of a header", errBadBatch, len(b))
		}
		n := int64(be.Uint32(b[8:])) + 12
		if n < batchHeaderLen || n > int64(len(b)) {
			return next, fmt.Errorf("%w: batch length %d with %d bytes left", errBadBatch, n, len(b))
		}
		batch := b[:n]
		b = b[n:]
		base := int64(be.Uint64(batch[0:]))
		if batch[16] != 2 {
			return next, fmt.Errorf("%w: magic %d", errBadBatch, batch[16])
		}
		if crc32.Checksum(batch[21:], castagnoli) != be.Uint32(batch[17:]) {
			return next, fmt.Errorf("%w: crc mismatch at offset %d", errBadBatch, base)
		}
		attrs := be.Uint16(batch[21:])
		next = base + int64(be.Uint32(batch[23:])) + 1
		if attrs&0x20 != 0 { // control batch
			continue
		}
		if attrs&0x7 != 0 {
			return next, fmt.Errorf("%w: compressed batch at offset %d", errBadBatch, base)
		}
		count := int(int32(be.Uint32(batch[57:])))
		rd := batch[batchHeaderLen:]
		for i := 0; i < count; i++ {
			ln, k := binary.Varint(rd)
			if k <= 0 || ln < 0 || ln > int64(len(rd)-k) {
				return next, fmt.Errorf("%w: record %d of batch at %d: bad length", errBadBatch, i, base)
			}
			rec := rd[k : k+int(ln)]
			rd = rd[k+int(ln):]
			r, delta, err := parseRecord(rec)
			if err != nil {
				return next, fmt.Errorf("%w: record %d of batch at %d: %w", errBadBatch, i, base, err)
			}
			if err := fn(base+delta, r); err != nil {
				return next, err
			}
		}
	}
	return next, nil
}

// parseRecord reads one record body (after its length).
func parseRecord(b []byte) (kv, int64, error) {
	if len(b) < 1 {
		return kv{}, 0, errors.New("empty record")
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
	bytesField := func() ([]byte, bool) {
		n, ok := varint()
		if !ok || n < -1 || n > int64(len(b)) {
			return nil, false
		}
		if n < 0 {
			return nil, true
		}
		v := b[:n:n]
		b = b[n:]
		if v == nil {
			v = []byte{}
		}
		return v, true
	}
	if _, ok := varint(); !ok { // timestamp delta
		return kv{}, 0, errors.New("bad timestamp delta")
	}
	delta, ok := varint()
	if !ok || delta < 0 {
		return kv{}, 0, errors.New("bad offset delta")
	}
	key, ok := bytesField()
	if !ok {
		return kv{}, 0, errors.New("bad key")
	}
	value, ok := bytesField()
	if !ok {
		return kv{}, 0, errors.New("bad value")
	}
	// Headers are ignored; the coordinator writes none.
	return kv{key: key, value: value}, delta, nil
}
