package records

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Producer identifies an idempotent producer's batch: its id, epoch and
// the sequence number of the batch's first record. The zero value is not
// idempotent; use NoProducer.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// NoProducer marks a batch without idempotence, as Kafka clients send it.
var NoProducer = Producer{ID: -1, Epoch: -1, BaseSequence: -1}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Build encodes recs (at least one) as one uncompressed magic-v2 batch with
// base offset 0 and CreateTime timestamps, which is what a Kafka client's
// Produce carries and what log.ValidateClientBatch accepts. The partition
// stamps the base offset and leader epoch when it appends.
func Build(recs []Record, p Producer) []byte {
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	for _, r := range recs[1:] {
		first = min(first, r.Timestamp)
		maxTS = max(maxTS, r.Timestamp)
	}
	b := make([]byte, log.HeaderSize, log.HeaderSize+Size(recs))
	// base offset 0 (bytes 0-7); length at 8 is filled in below.
	binary.BigEndian.PutUint32(b[12:], 0xffffffff) // partition leader epoch: -1 until stamped
	b[16] = 2                                      // magic
	// CRC at 17, attributes at 21 (0: uncompressed, CreateTime).
	binary.BigEndian.PutUint32(b[23:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(first))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[43:], uint64(p.ID))
	binary.BigEndian.PutUint16(b[51:], uint16(p.Epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(p.BaseSequence))
	binary.BigEndian.PutUint32(b[57:], uint32(len(recs)))
	var body []byte
	for i := range recs {
		body = appendRecord(body[:0], &recs[i], int64(i), recs[i].Timestamp-first)
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// Size is an upper bound of the encoded size of recs' records (without the
// batch header), for capacity and limit checks.
func Size(recs []Record) int {
	n := 0
	for i := range recs {
		n += RecordSize(&recs[i])
	}
	return n
}

// RecordSize bounds one record's encoded size, its length prefix included.
func RecordSize(r *Record) int {
	n := 1 + 3*binary.MaxVarintLen64 + len(r.Key) + len(r.Value) + binary.MaxVarintLen32
	for _, h := range r.Headers {
		n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
	}
	return n + binary.MaxVarintLen32
}

func appendRecord(b []byte, r *Record, offsetDelta, tsDelta int64) []byte {
	b = append(b, 0) // attributes
	b = binary.AppendVarint(b, tsDelta)
	b = binary.AppendVarint(b, offsetDelta)
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = binary.AppendVarint(b, int64(len(r.Headers)))
	for _, h := range r.Headers {
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendBytes(b, h.Value)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}
