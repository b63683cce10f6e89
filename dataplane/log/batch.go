package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Layout of a Kafka record batch header, magic v2. Every field is big endian.
const (
	offBaseOffset    = 0
	offLength        = 8  // batchLength: bytes after this field
	offLeaderEpoch   = 12 // partitionLeaderEpoch, outside the CRC
	offMagic         = 16
	offCRC           = 17 // CRC32C of bytes [21:]
	offAttributes    = 21
	offLastDelta     = 23
	offFirstTS       = 27
	offMaxTS         = 35
	offProducerID    = 43
	offProducerEpoch = 51
	offBaseSequence  = 53
	offNumRecords    = 57

	// HeaderSize is the size of a v2 batch header; records follow it.
	HeaderSize = 61
	// lengthOverhead is the size of the base offset and length fields, which
	// batchLength does not count.
	lengthOverhead = 12

	attrCompression   = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Callers match them with errors.Is; the wrapping error names
// the operation and the details.
var (
	ErrCorruptBatch     = errors.New("corrupt record batch")
	ErrInvalidMagic     = errors.New("record batch magic is not 2")
	ErrBatchTooLarge    = errors.New("record batch too large")
	ErrControlBatch     = errors.New("control batch not accepted from clients")
	ErrOffsetOutOfRange = errors.New("offset out of range")
	ErrNotBatchBoundary = errors.New("offset is not the first offset of a batch")
	ErrClosed           = errors.New("log closed")
	ErrLogFailed        = errors.New("log failed after an i/o error")
)

// Header is the parsed header of a v2 record batch.
type Header struct {
	BaseOffset      int64
	Length          int32 // batchLength: size of the batch minus 12
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Size is the whole batch size in bytes.
func (h Header) Size() int64 { return int64(h.Length) + lengthOverhead }

// LastOffset is the offset of the last record in the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// IsControl reports whether this is a control batch (transaction marker).
func (h Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// Compression is the codec in the attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h Header) Compression() int { return int(h.Attributes & attrCompression) }

// ParseHeader decodes the header at the start of b. It checks the magic byte
// and that the length field is large enough for a header, but not the CRC nor
// whether b holds the whole batch.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	h := Header{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:          int32(binary.BigEndian.Uint32(b[offLength:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastDelta:])),
		FirstTimestamp:  int64(binary.BigEndian.Uint64(b[offFirstTS:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTS:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:      int32(binary.BigEndian.Uint32(b[offNumRecords:])),
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrInvalidMagic, h.Magic)
	}
	if h.Length < HeaderSize-lengthOverhead {
		return h, fmt.Errorf("%w: batch length %d is shorter than a header", ErrCorruptBatch, h.Length)
	}
	return h, nil
}

// checkFields checks the header fields that do not need the record bytes.
func checkFields(h Header) error {
	if h.NumRecords <= 0 {
		return fmt.Errorf("%w: %d records", ErrCorruptBatch, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return fmt.Errorf("%w: last offset delta %d with %d records", ErrCorruptBatch, h.LastOffsetDelta, h.NumRecords)
	}
	if h.BaseOffset < 0 || h.BaseOffset > maxOffset-int64(h.LastOffsetDelta) {
		return fmt.Errorf("%w: base offset %d", ErrCorruptBatch, h.BaseOffset)
	}
	return nil
}

// checkCompactedFields is checkFields for a batch the cleaner rewrote: it
// keeps its offset range (base offset and last offset delta) but may hold
// fewer records than that range.
func checkCompactedFields(h Header) error {
	if h.NumRecords <= 0 || h.LastOffsetDelta < h.NumRecords-1 {
		return fmt.Errorf("%w: last offset delta %d with %d records", ErrCorruptBatch, h.LastOffsetDelta, h.NumRecords)
	}
	if h.BaseOffset < 0 || h.BaseOffset > maxOffset-int64(h.LastOffsetDelta) {
		return fmt.Errorf("%w: base offset %d", ErrCorruptBatch, h.BaseOffset)
	}
	return nil
}

// maxOffset keeps offsets far from int64 overflow.
const maxOffset = 1 << 62

// ValidateBatch checks that b is exactly one well-formed v2 batch: magic 2,
// the length field matches len(b), the CRC32C over b[21:] matches, and the
// record count agrees with the last offset delta. It returns the header.
func ValidateBatch(b []byte) (Header, error) {
	h, err := checkFraming(b)
	if err != nil {
		return h, err
	}
	return h, checkCRC(b, h)
}

// checkFraming is ValidateBatch without the CRC: the header, the length
// field against len(b), and the record count.
func checkFraming(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != int64(len(b)) {
		return h, fmt.Errorf("%w: batch length field says %d bytes, buffer has %d", ErrCorruptBatch, h.Size(), len(b))
	}
	return h, checkFields(h)
}

// checkCRC hashes the batch's bytes after the CRC field: the one pass over
// the records that validation costs.
func checkCRC(b []byte, h Header) error {
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, got)
	}
	return nil
}

// ValidateClientBatch is ValidateBatch plus the rules for batches that arrive
// in a Produce request: base offset 0, no control batches, a known codec.
func ValidateClientBatch(b []byte) (Header, error) {
	h, err := CheckClientBatchFraming(b)
	if err != nil {
		return h, err
	}
	return h, checkCRC(b, h)
}

// CheckClientBatchFraming is ValidateClientBatch without the CRC: what a
// front door checks before handing a batch to its partition, whose Produce
// validates it whole, once, on the leader's path.
func CheckClientBatchFraming(b []byte) (Header, error) {
	h, err := checkFraming(b)
	if err != nil {
		return h, err
	}
	if h.BaseOffset != 0 {
		return h, fmt.Errorf("%w: client batch has base offset %d, want 0", ErrCorruptBatch, h.BaseOffset)
	}
	if h.IsControl() {
		return h, ErrControlBatch
	}
	if h.Compression() > 4 {
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, h.Compression())
	}
	return h, nil
}

// stamp writes the base offset and leader epoch into a batch. Neither field
// is covered by the CRC.
func stamp(b []byte, base int64, epoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
