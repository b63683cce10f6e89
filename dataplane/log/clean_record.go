package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The cleaner's view of a record batch: enough of each record to decide
// whether it survives (key, null value, offset delta) and its encoded bytes,
// which a rewritten batch carries unchanged.

// record is one decoded record of a v2 batch.
type record struct {
	offsetDelta int32
	key         []byte
	keyed       bool // the key is not null
	tombstone   bool // the value is null
	raw         []byte
}

// nextRecord decodes the record at the start of b: its length varint, then
// attributes, timestamp delta, offset delta, key and value. Headers are not
// decoded; they stay in raw.
func nextRecord(b []byte) (record, int, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return record{}, 0, fmt.Errorf("%w: bad record length", ErrCorruptBatch)
	}
	end := n + int(length)
	body := b[n:end]
	if len(body) < 1 {
		return record{}, 0, fmt.Errorf("%w: record without attributes", ErrCorruptBatch)
	}
	p := 1 // attributes
	if _, m := binary.Varint(body[p:]); m <= 0 {
		return record{}, 0, fmt.Errorf("%w: bad record timestamp delta", ErrCorruptBatch)
	} else {
		p += m
	}
	od, m := binary.Varint(body[p:])
	if m <= 0 || od < 0 || od > maxRelOffset {
		return record{}, 0, fmt.Errorf("%w: bad record offset delta", ErrCorruptBatch)
	}
	p += m
	r := record{offsetDelta: int32(od), raw: b[:end]}
	kl, m := binary.Varint(body[p:])
	if m <= 0 || kl < -1 || kl > int64(len(body)-p-m) {
		return record{}, 0, fmt.Errorf("%w: bad record key length", ErrCorruptBatch)
	}
	p += m
	if kl >= 0 {
		r.key, r.keyed = body[p:p+int(kl)], true
		p += int(kl)
	}
	vl, m := binary.Varint(body[p:])
	if m <= 0 || vl < -1 || vl > int64(len(body)-p-m) {
		return record{}, 0, fmt.Errorf("%w: bad record value length", ErrCorruptBatch)
	}
	r.tombstone = vl == -1
	return r, end, nil
}

// batchRecords decodes the records of batch b (decompressing them if the
// batch is compressed) and calls fn for each in order. The record bytes are
// valid only during the call.
func batchRecords(b []byte, h Header, dec kgo.Decompressor, fn func(record) error) error {
	payload := b[HeaderSize:]
	if c := h.Compression(); c != 0 {
		var err error
		if payload, err = dec.Decompress(payload, kgo.CompressionCodecType(c)); err != nil {
			return fmt.Errorf("%w: decompress batch %d: %w", ErrCorruptBatch, h.BaseOffset, err)
		}
	}
	prev := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		r, n, err := nextRecord(payload)
		if err != nil {
			return fmt.Errorf("batch %d record %d: %w", h.BaseOffset, i, err)
		}
		if r.offsetDelta <= prev || r.offsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: batch %d record %d has offset delta %d", ErrCorruptBatch, h.BaseOffset, i, r.offsetDelta)
		}
		prev = r.offsetDelta
		if err := fn(r); err != nil {
			return err
		}
		payload = payload[n:]
	}
	if len(payload) != 0 {
		return fmt.Errorf("%w: batch %d has %d bytes after its records", ErrCorruptBatch, h.BaseOffset, len(payload))
	}
	return nil
}

// filterBatch returns batch b with only the records keep accepts. A batch
// that keeps every record is returned as it is (out aliases b); one that
// keeps none is nil. Otherwise the result is a new uncompressed batch with
// the same base offset, last offset delta, timestamps, leader epoch and
// producer fields, the surviving records byte for byte (so their offset and
// timestamp deltas, hence their offsets and timestamps, do not change), its
// record count and length set and its CRC32C recomputed. The result is a
// function of b and the surviving records alone, so filtering twice equals
// filtering once by both rules, and every replica computes the same bytes.
func filterBatch(b []byte, h Header, dec kgo.Decompressor, keep func(record) bool, out []byte) ([]byte, int, error) {
	start := len(out)
	out = append(out, b[:HeaderSize]...)
	kept, removed := int32(0), 0
	err := batchRecords(b, h, dec, func(r record) error {
		if keep(r) {
			out = append(out, r.raw...)
			kept++
		} else {
			removed++
		}
		return nil
	})
	if err != nil {
		return out[:start], 0, err
	}
	switch {
	case removed == 0:
		return append(out[:start], b...), 0, nil
	case kept == 0:
		return out[:start], removed, nil
	}
	nb := out[start:]
	binary.BigEndian.PutUint16(nb[offAttributes:], uint16(h.Attributes&^attrCompression))
	binary.BigEndian.PutUint32(nb[offNumRecords:], uint32(kept))
	binary.BigEndian.PutUint32(nb[offLength:], uint32(len(nb)-lengthOverhead))
	binary.BigEndian.PutUint32(nb[offCRC:], crc32.Checksum(nb[offAttributes:], castagnoli))
	return out, removed, nil
}

// ErrKeylessRecord: a record without a key was produced to a compacted log,
// where the key is what compaction keeps the newest record of.
var ErrKeylessRecord = errors.New("record without a key on a compacted topic")

// CheckKeyed checks that every record of the client batch b has a non-null
// key, decoding (and decompressing) its records with the cleaner's decoder.
// It returns ErrKeylessRecord naming the first keyless record, or
// ErrCorruptBatch if the records do not decode.
func CheckKeyed(b []byte) error {
	h, err := ParseHeader(b)
	if err != nil {
		return fmt.Errorf("check keys: %w", err)
	}
	if int64(len(b)) != h.Size() {
		return fmt.Errorf("check keys: %w: batch length %d, %d bytes", ErrCorruptBatch, h.Size(), len(b))
	}
	i := 0
	err = batchRecords(b, h, kgo.DefaultDecompressor(), func(r record) error {
		if !r.keyed {
			return fmt.Errorf("check keys: record %d of the batch: %w", i, ErrKeylessRecord)
		}
		i++
		return nil
	})
	return err
}
