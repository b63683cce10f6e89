package log

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzFilterBatch feeds arbitrary bytes, framed as an uncompressed batch,
// to the cleaner's record decoder and batch rewriter. It must never panic;
// a batch it accepts and rewrites must come out well framed with a correct
// CRC, decode again to the records it kept, and be left as it is by a
// second rewrite that keeps everything.
func FuzzFilterBatch(f *testing.F) {
	f.Add(keyedBatch(5, kv{key: []byte("a"), value: []byte("1")}, kv{value: []byte("x")}, kv{key: []byte("a")}), byte(0b101))
	f.Add(keyedBatch(5, kv{key: []byte("k"), value: make([]byte, 300)}), byte(0))
	f.Add(makeBatch(4, 40, 9, 1), byte(0xff))
	dec := kgo.DefaultDecompressor()
	f.Fuzz(func(t *testing.T, b []byte, mask byte) {
		if len(b) < HeaderSize {
			return
		}
		b = append([]byte(nil), b...)
		// Compressed payloads are the codecs' business, not the decoder's.
		b[offAttributes+1] &^= attrCompression
		binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-lengthOverhead))
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
		h, err := ParseHeader(b)
		if err != nil || checkCompactedFields(h) != nil {
			return
		}
		i := 0
		keep := func(r record) bool { i++; return mask>>(i%8)&1 == 1 }
		out, removed, err := filterBatch(b, h, dec, keep, nil)
		if err != nil {
			return
		}
		if len(out) == 0 {
			if removed != int(h.NumRecords) {
				t.Fatalf("empty result after removing %d of %d records", removed, h.NumRecords)
			}
			return
		}
		oh, err := ParseHeader(out)
		if err != nil || oh.Size() != int64(len(out)) || checkCompactedFields(oh) != nil || checkCRC(out, oh) != nil {
			t.Fatalf("rewritten batch is malformed: %+v %v", oh, err)
		}
		if oh.BaseOffset != h.BaseOffset || oh.LastOffsetDelta != h.LastOffsetDelta || oh.FirstTimestamp != h.FirstTimestamp || oh.MaxTimestamp != h.MaxTimestamp {
			t.Fatalf("rewrite moved offsets or timestamps: %+v from %+v", oh, h)
		}
		if int(oh.NumRecords)+removed != int(h.NumRecords) {
			t.Fatalf("%d kept + %d removed != %d", oh.NumRecords, removed, h.NumRecords)
		}
		again, n, err := filterBatch(out, oh, dec, func(record) bool { return true }, nil)
		if err != nil || n != 0 || string(again) != string(out) {
			t.Fatalf("keeping every record of the rewritten batch changed it: %v", err)
		}
	})
}
