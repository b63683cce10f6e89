package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch encodes an uncompressed v2 batch of n records with kmsg. Each
// record's value is valueSize bytes that start with tag, so a test can tell
// batches apart. Timestamps: first ts, record i at ts+i.
func makeBatch(n, valueSize int, ts int64, tag uint64) []byte {
	var recs []byte
	for i := range n {
		v := make([]byte, max(valueSize, 8))
		binary.BigEndian.PutUint64(v, tag)
		if valueSize >= 12 {
			binary.BigEndian.PutUint32(v[8:], uint32(i))
		}
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: v}
		body := r.AppendTo(nil)[1:] // Length 0 encodes as one varint byte
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  ts,
		MaxTimestamp:    ts + int64(n-1),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-lengthOverhead))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

// batchTag returns the tag makeBatch put in the first record's value.
func batchTag(t testing.TB, b []byte) uint64 {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("decode batch: %v", err)
	}
	// First record: length varint, attributes, ts delta, offset delta, key
	// (null: -1 → one byte), then the value's length varint and the value.
	var r kmsg.Record
	if err := r.ReadFrom(rb.Records); err != nil {
		t.Fatalf("decode record: %v", err)
	}
	return binary.BigEndian.Uint64(r.Value)
}

func testConfig(t testing.TB) Config {
	return Config{Dir: t.TempDir(), Logger: testLogger(t)}
}

func openLog(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readAll returns the bytes of every batch from offset to the end.
func readAll(t testing.TB, l *Log, offset int64) []byte {
	t.Helper()
	var out []byte
	for {
		sl, err := l.Read(offset, 1<<20, 1<<62)
		if err != nil {
			t.Fatalf("read %d: %v", offset, err)
		}
		if sl.Size == 0 {
			return out
		}
		out, err = sl.AppendTo(out)
		sl.Release()
		if err != nil {
			t.Fatalf("read %d: %v", offset, err)
		}
		offset = sl.NextOffset
	}
}

// splitBatches splits concatenated batches, validating each.
func splitBatches(t fataler, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) {
			t.Fatalf("split batches: %v (%d bytes left)", err, len(b))
		}
		if _, err := ValidateBatch(b[:h.Size()]); err != nil {
			t.Fatalf("split batches: %v", err)
		}
		out = append(out, b[:h.Size()])
		b = b[h.Size():]
	}
	return out
}

// fataler is the part of testing.TB that rapid.T also has.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func sameBatch(a, b []byte) bool { return bytes.Equal(a, b) }
