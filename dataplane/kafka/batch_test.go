package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch encodes values as one uncompressed v2 record batch, as a
// producer without idempotence sends it.
func makeBatch(values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the length varint of 0 takes one byte
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(values)), Records: recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
