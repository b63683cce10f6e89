package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compressBatch returns b with its records compressed by codec.
func compressBatch(t *testing.T, b []byte, codec kgo.CompressionCodec) []byte {
	t.Helper()
	c, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z, typ := c.Compress(&buf, b[HeaderSize:])
	if typ == 0 {
		t.Fatal("not compressed")
	}
	out := append(append([]byte(nil), b[:HeaderSize]...), z...)
	attrs := binary.BigEndian.Uint16(out[offAttributes:])
	binary.BigEndian.PutUint16(out[offAttributes:], attrs|uint16(typ))
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-lengthOverhead))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

// TestCleanCompressedBatches checks that compressed batches are compacted
// too: one that keeps every record stays as it was, compressed, byte for
// byte; one that loses records is rewritten uncompressed with the
// survivors at their offsets.
func TestCleanCompressedBatches(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		cfg := cleanConfig(t, t.TempDir())
		l := openLog(t, cfg)
		big := bytes.Repeat([]byte("z"), 2000)
		a := compressBatch(t, keyedBatch(100, kv{key: []byte("a"), value: big}, kv{key: []byte("b"), value: big}, kv{key: []byte("c"), value: big}), codec)
		d := compressBatch(t, keyedBatch(110, kv{key: []byte("d"), value: big}, kv{key: []byte("e"), value: big}), codec)
		if _, _, err := l.Append(a, 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(d, 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(keyedBatch(120, kv{key: []byte("a"), value: []byte("new")}), 1); err != nil {
			t.Fatal(err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Clean(context.Background(), CleanParams{UpTo: l.NextOffset(), Now: farFuture}); err != nil {
			t.Fatal(err)
		}
		got := splitCompacted(t, readAll(t, l, 0))
		if len(got) != 3 {
			t.Fatalf("%d batches, want 3", len(got))
		}
		h0, _ := ParseHeader(got[0])
		if h0.Compression() != 0 || h0.BaseOffset != 0 || h0.LastOffsetDelta != 2 || h0.NumRecords != 2 {
			t.Fatalf("rewritten batch header %+v", h0)
		}
		recs := decodeRecords(t, got[0])
		if len(recs) != 2 || recs[0].key != "b" || recs[0].offset != 1 || recs[1].key != "c" || recs[1].offset != 2 || recs[1].ts != 102 {
			t.Fatalf("rewritten batch records %+v", recs)
		}
		if !bytes.Equal(got[1], d) {
			t.Fatal("a batch that kept every record changed")
		}
		if r := decodeRecords(t, got[2]); len(r) != 1 || r[0].offset != 5 || r[0].value != "new" {
			t.Fatalf("last batch %+v", r)
		}
	}
}
