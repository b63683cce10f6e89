package celltest

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyedBatch is a batch at base of records with keys; a nil value is a
// tombstone.
func keyedBatch(base int64, kv ...[]byte) []byte {
	var recs []byte
	for i := 0; i < len(kv); i += 2 {
		r := kmsg.Record{OffsetDelta: int32(i / 2), Key: kv[i], Value: kv[i+1]}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // what follows the 1-byte varint of 0
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: int32(len(kv)/2 - 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(kv) / 2), Records: recs}
	rb.Length = int32(len(rb.AppendTo(nil)) - 12)
	return rb.AppendTo(nil)
}

// TestKeyedRecords: records come back at their absolute offsets with their
// keys and tombstones, the unkeyed batches Batch builds read as Records
// reads them, and cut or corrupt bytes are an error.
func TestKeyedRecords(t *testing.T) {
	plain := Batch([]byte("a"), []byte("b"))
	b := append(append([]byte(nil), plain...), keyedBatch(2, []byte("k"), nil, []byte("j"), []byte("v"))...)
	got, err := KeyedRecords(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []KeyedRecord{{Offset: 0, Value: []byte("a")}, {Offset: 1, Value: []byte("b")},
		{Offset: 2, Key: []byte("k")}, {Offset: 3, Key: []byte("j"), Value: []byte("v")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	plainRecs, err := Records(plain)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range plainRecs {
		if r.Offset != got[i].Offset || !bytes.Equal(r.Value, got[i].Value) {
			t.Fatalf("record %d: Records %+v, KeyedRecords %+v", i, r, got[i])
		}
	}
	for _, bad := range [][]byte{b[:5], b[:len(plain)+20], b[:len(b)-1]} {
		if recs, err := KeyedRecords(bad); err == nil {
			t.Fatalf("%d of %d bytes decoded to %+v without an error", len(bad), len(b), recs)
		}
	}
}

// FuzzKeyedRecords: any bytes decode to records or an error, never a
// panic, and decoding the same bytes again gives the same records (the
// decoder neither depends on nor changes its input).
func FuzzKeyedRecords(f *testing.F) {
	f.Add(Batch([]byte("a"), nil, []byte("bc")))
	f.Add(keyedBatch(7, []byte("k"), nil, []byte("j"), []byte("v")))
	f.Add(append(Batch([]byte("x")), keyedBatch(1, []byte("k"), []byte("v"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		first, err := KeyedRecords(b)
		if !bytes.Equal(in, b) {
			t.Fatal("the decoder changed its input")
		}
		if err != nil {
			return
		}
		again, err := KeyedRecords(b)
		if err != nil || !reflect.DeepEqual(first, again) {
			t.Fatalf("second decode %+v, %v; first %+v", again, err, first)
		}
	})
}
