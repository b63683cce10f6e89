package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
)

// FuzzDecode feeds arbitrary bytes to Decode. Invariants: it never panics
// and never allocates beyond its bound (the fuzzer's memory limit catches
// that); it either fails with ErrCorrupt or ErrTooLarge or returns records
// whose offsets are ≥ from, ascending within a batch, and below next.
func FuzzDecode(f *testing.F) {
	good := Build(sample(4), NoProducer)
	f.Add(good, int64(0))
	f.Add(good, int64(2))
	f.Add(append(bytes.Clone(good), good...), int64(1))
	f.Add(compressed(f, good, codecSnappy, s2.EncodeSnappy(nil, good[61:])), int64(0))
	f.Add(good[:70], int64(0))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, from int64) {
		recs, next, err := Decode(data, from, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrTooLarge", err)
			}
			return
		}
		for _, r := range recs {
			if r.Offset < from || r.Offset >= next {
				t.Fatalf("record offset %d outside [%d, %d)", r.Offset, from, next)
			}
		}
	})
}

// FuzzBuildDecode: whatever records go in come back out, in order, with
// their offsets.
func FuzzBuildDecode(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "h", []byte("hv"), int64(5), uint8(3))
	f.Add([]byte(nil), []byte(nil), "", []byte(nil), int64(0), uint8(1))
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte, base int64, n uint8) {
		if n == 0 || base < 0 || base > 1<<40 {
			return
		}
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{Timestamp: int64(i), Key: key, Value: value, Headers: []Header{{Key: hk, Value: hv}}}
		}
		b := Build(recs, NoProducer)
		binary.BigEndian.PutUint64(b, uint64(base))
		got, next, err := Decode(b, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != int(n) || next != base+int64(n) {
			t.Fatalf("%d records, next %d", len(got), next)
		}
		for i, r := range got {
			if r.Offset != base+int64(i) || !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, value) || (key == nil) != (r.Key == nil) ||
				len(r.Headers) != 1 || r.Headers[0].Key != hk || !bytes.Equal(r.Headers[0].Value, hv) {
				t.Fatalf("record %d: %+v", i, r)
			}
		}
	})
}
