package celltest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch builds a Kafka record batch (magic v2, uncompressed, no producer id)
// with one record per value, base offset 0, as a client would produce it.
func Batch(values ...[]byte) []byte {
	var recs []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, 0)             // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // null key
		r = binary.AppendVarint(r, int64(len(v))) // value length
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, 61, 61+len(recs))
	b = append(b, recs...)
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], 0)
	b[16] = 2
	be.PutUint16(b[21:], 0)
	be.PutUint32(b[23:], uint32(len(values)-1))
	be.PutUint64(b[27:], 1)
	be.PutUint64(b[35:], 1)
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	be.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	be.PutUint32(b[57:], uint32(len(values)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// IdempotentBatch is Batch from producer pid at epoch, its first record
// at sequence seq, as an idempotent client sends it.
func IdempotentBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	b := Batch(values...)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// Record is one record read back from a fetched range.
type Record struct {
	Offset      int64
	LeaderEpoch int32
	Value       []byte
}

// Records decodes the uncompressed batches Batch builds, laid end to end as
// a fetch returns them.
func Records(b []byte) ([]Record, error) {
	var out []Record
	for len(b) > 0 {
		if len(b) < 61 {
			return nil, errors.New("records: short batch header")
		}
		size := int(binary.BigEndian.Uint32(b[8:])) + 12
		if size > len(b) || size < 61 {
			return nil, fmt.Errorf("records: batch of %d bytes, %d left", size, len(b))
		}
		base := int64(binary.BigEndian.Uint64(b))
		epoch := int32(binary.BigEndian.Uint32(b[12:]))
		n := int(binary.BigEndian.Uint32(b[57:]))
		p := b[61:size]
		for i := 0; i < n; i++ {
			l, k := binary.Varint(p)
			if k <= 0 || int(l) > len(p)-k {
				return nil, errors.New("records: bad record length")
			}
			r := p[k : k+int(l)]
			p = p[k+int(l):]
			r = r[1:] // attributes
			_, k = binary.Varint(r)
			r = r[k:]
			delta, k := binary.Varint(r)
			r = r[k:]
			kl, k := binary.Varint(r)
			r = r[k:]
			if kl > 0 {
				r = r[kl:]
			}
			vl, k := binary.Varint(r)
			r = r[k:]
			var v []byte
			if vl >= 0 {
				v = append([]byte(nil), r[:vl]...)
			}
			out = append(out, Record{Offset: base + delta, LeaderEpoch: epoch, Value: v})
		}
		b = b[size:]
	}
	return out, nil
}

// KeyedRecord is one record decoded with its key; a nil Value is a
// tombstone.
type KeyedRecord struct {
	Offset     int64
	Key, Value []byte
}

// KeyedRecords decodes uncompressed record batches laid end to end, as a
// fetch or a log read returns them, through kmsg's decoder: every record
// at its absolute offset, with its key, tombstones as nil values. Bytes
// that are not whole batches are an error, never a panic.
func KeyedRecords(b []byte) ([]KeyedRecord, error) {
	var out []KeyedRecord
	for len(b) > 0 {
		if len(b) < 12 {
			return nil, errors.New("keyed records: short batch header")
		}
		n := int64(binary.BigEndian.Uint32(b[8:])) + 12
		if n > int64(len(b)) {
			return nil, fmt.Errorf("keyed records: batch of %d bytes, %d left", n, len(b))
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:n]); err != nil {
			return nil, fmt.Errorf("keyed records: batch at %d: %w", rb.FirstOffset, err)
		}
		recs := rb.Records
		for range rb.NumRecords {
			l, m := binary.Varint(recs)
			if m <= 0 || l < 0 || l > int64(len(recs)-m) {
				return nil, fmt.Errorf("keyed records: bad record length in the batch at %d", rb.FirstOffset)
			}
			var rec kmsg.Record
			if err := rec.ReadFrom(recs[:m+int(l)]); err != nil {
				return nil, fmt.Errorf("keyed records: record in the batch at %d: %w", rb.FirstOffset, err)
			}
			recs = recs[m+int(l):]
			out = append(out, KeyedRecord{Offset: rb.FirstOffset + int64(rec.OffsetDelta), Key: rec.Key, Value: rec.Value})
		}
		b = b[n:]
	}
	return out, nil
}
