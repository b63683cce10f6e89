package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/log"
)

func sample(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i%3)*7,
			Key:       []byte(fmt.Sprintf("key-%d", i)),
			Value:     bytes.Repeat([]byte{byte(i)}, i*10),
			Headers:   []Header{{Key: "h", Value: []byte("v")}, {Key: "null", Value: nil}},
		}
	}
	recs[0].Key = nil
	recs[n-1].Value = nil
	return recs
}

func TestBuildIsAValidClientBatch(t *testing.T) {
	recs := sample(5)
	b := Build(recs, Producer{ID: 7, Epoch: 2, BaseSequence: 40})
	h, err := log.ValidateClientBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRecords != 5 || h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != 40 || h.FirstTimestamp != 1_700_000_000_000 || h.MaxTimestamp != 1_700_000_000_014 {
		t.Fatalf("header %+v", h)
	}
	if got := len(b) - log.HeaderSize; got > Size(recs) {
		t.Fatalf("records took %d bytes, Size bounded them at %d", got, Size(recs))
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	recs := sample(6)
	b := Build(recs, NoProducer)
	stampBase(b, 100)
	got, next, err := Decode(b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if next != 106 || len(got) != 6 {
		t.Fatalf("next %d, %d records", next, len(got))
	}
	for i := range recs {
		recs[i].Offset = 100 + int64(i)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, recs)
	}
	// Records below from are dropped; next still follows the batch.
	got, next, err = Decode(b, 104, 0)
	if err != nil || next != 106 || len(got) != 2 || got[0].Offset != 104 {
		t.Fatalf("from 104: %d records, next %d, err %v", len(got), next, err)
	}
}

// stampBase sets a batch's base offset as the partition does.
func stampBase(b []byte, base int64) { binary.BigEndian.PutUint64(b, uint64(base)) }

// compressed re-encodes an uncompressed batch's records with codec.
func compressed(t testing.TB, plain []byte, codec int, body []byte) []byte {
	t.Helper()
	out := append([]byte(nil), plain[:log.HeaderSize]...)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint16(out[21:], uint16(codec))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

func TestDecodeCompressed(t *testing.T) {
	recs := sample(20)
	plain := Build(recs, NoProducer)
	raw := plain[log.HeaderSize:]
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	cases := []struct {
		name  string
		codec int
		body  func() []byte
	}{
		{"snappy raw", codecSnappy, func() []byte { return s2.EncodeSnappy(nil, raw) }},
		{"snappy xerial", codecSnappy, func() []byte {
			b := append([]byte(nil), xerialMagic...)
			b = binary.BigEndian.AppendUint32(b, 1)
			b = binary.BigEndian.AppendUint32(b, 1)
			half := len(raw) / 2
			for _, part := range [][]byte{raw[:half], raw[half:]} {
				blk := s2.EncodeSnappy(nil, part)
				b = binary.BigEndian.AppendUint32(b, uint32(len(blk)))
				b = append(b, blk...)
			}
			return b
		}},
	}
	// franz-go's own compressors, as a Kafka client sends them.
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"snappy franz-go", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		comp, err := kgo.DefaultCompressor(c.codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		body, typ := comp.Compress(&buf, raw)
		body = append([]byte(nil), body...)
		cases = append(cases, struct {
			name  string
			codec int
			body  func() []byte
		}{c.name, int(typ), func() []byte { return body }})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := compressed(t, plain, tc.codec, tc.body())
			if _, err := log.ValidateClientBatch(b); err != nil {
				t.Fatal(err)
			}
			got, next, err := Decode(b, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if next != 20 || !reflect.DeepEqual(got, recs) {
				t.Fatalf("next %d, decoded %+v", next, got)
			}
			// A bound below the decompressed size refuses the batch.
			if _, _, err := Decode(b, 0, len(raw)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("bound %d: err %v, want ErrTooLarge", len(raw)-1, err)
			}
		})
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	good := Build(sample(3), NoProducer)
	cases := map[string][]byte{
		"truncated":     good[:len(good)-1],
		"short header":  good[:30],
		"bad magic":     func() []byte { b := bytes.Clone(good); b[16] = 1; return b }(),
		"unknown codec": func() []byte { b := bytes.Clone(good); b[22] = 6; return b }(),
		"bad gzip":      compressed(t, good, codecGzip, []byte("not gzip")),
		"bad record":    func() []byte { b := bytes.Clone(good); b[log.HeaderSize] = 0x7f; return b }(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Decode(b, 0, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestKeyPartitionMatchesFranzGo: keyed records land where a franz-go
// producer (Kafka's default murmur2 partitioner) puts them.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for n := 1; n <= 13; n += 4 {
		for i := range 500 {
			key := []byte(fmt.Sprintf("user-%d", i))
			if i%50 == 0 {
				key = bytes.Repeat([]byte{byte(i)}, i%7)
			}
			want := p.Partition(&kgo.Record{Key: key}, n)
			if got := KeyPartition(key, n); int(got) != want {
				t.Fatalf("key %q over %d partitions: %d, franz-go %d", key, n, got, want)
			}
		}
	}
}
