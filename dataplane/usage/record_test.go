package usage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	recs := []Record{
		{Version: RecordVersion, Node: 1, Boot: "ab", Seq: 1, At: 1700000000000, Entries: []Entry{{Tenant: "t1", Topic: "x", Meter: BytesIn, Hour: 1699999200, Value: 42}}},
		{Version: RecordVersion, Node: 2, Boot: "cd", Seq: 7, At: 1700000000001, Entries: []Entry{{Tenant: "t2", Meter: MessagesOut, Hour: 1699999200, Value: 1}}},
	}
	var log []byte
	for i, r := range recs {
		b, err := EncodeBatch(r)
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(b[0:], uint64(10+i)) // as the partition stamps it
		log = append(log, b...)
	}
	var got []Record
	var offs []int64
	next, err := EachValue(log, func(off int64, v []byte) error {
		r, err := Decode(v)
		got = append(got, r)
		offs = append(offs, off)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != 12 || !reflect.DeepEqual(offs, []int64{10, 11}) {
		t.Fatalf("next %d offsets %v, want 12 [10 11]", next, offs)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %+v, want %+v", got, recs)
	}
}

func TestEachValueRefusesDamage(t *testing.T) {
	b, err := EncodeBatch(Record{Version: RecordVersion, Node: 1, Boot: "x", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"torn", b[:len(b)-1]},
		{"short header", b[:20]},
		{"flipped byte", func() []byte { c := bytes.Clone(b); c[len(c)-3] ^= 1; return c }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := EachValue(tc.b, func(int64, []byte) error { return nil }); !errors.Is(err, ErrBadBatch) {
				t.Fatalf("err %v, want ErrBadBatch", err)
			}
		})
	}
}

// FuzzEachValue: whatever the bytes (a usage partition's log is read back
// from disk and over the network), EachValue returns without panicking,
// and every value it yields lies inside the input.
func FuzzEachValue(f *testing.F) {
	b, _ := EncodeBatch(Record{Version: RecordVersion, Node: 1, Boot: "x", Seq: 1, Entries: []Entry{{Tenant: "t", Meter: BytesIn, Value: 1}}})
	f.Add(b)
	f.Add(append(bytes.Clone(b), b...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = EachValue(in, func(_ int64, v []byte) error {
			if len(v) > len(in) {
				t.Fatalf("value of %d bytes from %d bytes of input", len(v), len(in))
			}
			_, _ = Decode(v)
			return nil
		})
	})
}
