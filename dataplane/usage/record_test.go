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
		{Version: RecordVersion, Node: 2, Boot: "cd", Seq: 7, At: 1700000000001, Entries: []Entry{{Tenant: "t2", Meter: MessagesOut, Hour: 1699999200, Value: 1}},
			Ranges: []Range{{Tenant: "t2", Topic: "y", Partition: 3, End: 900, Hour: 1699999200, Bytes: 5000, Messages: 40}}},
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

// FuzzEachValue is the usage record decoder's fuzz target (EachValue over
// records.Decode, then Decode): whatever the bytes (a usage partition's
// log is read back from disk and over the network), it returns without
// panicking, every value it yields lies inside the input, the offsets it
// yields increase, and a record Decode accepts has the current version.
func FuzzEachValue(f *testing.F) {
	b, _ := EncodeBatch(Record{Version: RecordVersion, Node: 1, Boot: "x", Seq: 1, Entries: []Entry{{Tenant: "t", Meter: BytesIn, Value: 1}}})
	f.Add(b)
	b2 := bytes.Clone(b)
	binary.BigEndian.PutUint64(b2, 1) // as the partition stamps it
	f.Add(append(bytes.Clone(b), b2...))
	f.Add([]byte{})
	r, _ := EncodeBatch(Record{Version: RecordVersion, Node: 2, Boot: "y", Seq: 3, Ranges: []Range{{Tenant: "t", Topic: "a", End: 7, Bytes: 70, Messages: 7}}})
	binary.BigEndian.PutUint64(r, 5)
	f.Add(append(bytes.Clone(b), r...))
	f.Fuzz(func(t *testing.T, in []byte) {
		last := int64(-1)
		_, _ = EachValue(in, func(off int64, v []byte) error {
			if len(v) > len(in) {
				t.Fatalf("value of %d bytes from %d bytes of input", len(v), len(in))
			}
			if off <= last {
				t.Fatalf("offset %d after %d", off, last)
			}
			last = off
			if r, err := Decode(v); err == nil && r.Version != RecordVersion {
				t.Fatalf("decoded version %d", r.Version)
			}
			return nil
		})
	})
}
