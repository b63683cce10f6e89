package groups

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

func sampleGroup() groupRecord {
	return groupRecord{protocolType: "consumer", protocol: "cooperative-sticky", generation: 7, leader: "m1",
		members: []memberRecord{
			{id: "m1", clientID: "c1", clientHost: "/10.0.0.1", session: 45 * time.Second, rebalance: time.Minute, metadata: []byte{0, 1}, assignment: []byte{2}},
			{id: "m2", instanceID: "i2", clientID: "c2", clientHost: "/10.0.0.2", session: 10 * time.Second, rebalance: 10 * time.Second, metadata: []byte{}, assignment: nil},
		}}
}

func TestRecordsRoundTrip(t *testing.T) {
	keys := []recordKey{
		{kind: kindGroup, tenant: "t1", group: "orders"},
		{kind: kindOffset, tenant: "t1", group: "orders", tp: TopicPartition{TopicID: "0b6f", Partition: 11}},
	}
	for _, k := range keys {
		got, err := decodeKey(encodeKey(k))
		if err != nil || got != k {
			t.Fatalf("key %+v: got %+v, %v", k, got, err)
		}
	}
	c := Committed{Offset: 12345, LeaderEpoch: 3, Metadata: "m", CommittedAt: time.UnixMilli(1_700_000_000_123)}
	if got, err := decodeOffset(encodeOffset(c)); err != nil || !got.CommittedAt.Equal(c.CommittedAt) || got.Offset != c.Offset || got.Metadata != c.Metadata || got.LeaderEpoch != c.LeaderEpoch {
		t.Fatalf("offset: got %+v, %v", got, err)
	}
	g := sampleGroup()
	got, err := decodeGroup(encodeGroup(g))
	if err != nil || !reflect.DeepEqual(got, g) {
		t.Fatalf("group:\n got %+v, %v\nwant %+v", got, err, g)
	}
	// Batches carry keys, values and tombstones.
	recs := []kv{{key: encodeKey(keys[1]), value: encodeOffset(c)}, {key: encodeKey(keys[0])}}
	var seen []kv
	next, err := eachRecord(makeBatch(1, recs), func(off int64, r kv) error {
		if off != int64(len(seen)) {
			t.Fatalf("record offset %d", off)
		}
		seen = append(seen, r)
		return nil
	})
	if err != nil || next != 2 || len(seen) != 2 || !bytes.Equal(seen[0].value, recs[0].value) || seen[1].value != nil {
		t.Fatalf("batch: next %d, %v, %+v", next, err, seen)
	}
}

func TestRecordsRefuseUnknownVersions(t *testing.T) {
	b := encodeGroup(sampleGroup())
	b[1] = 1 // version 1
	if _, err := decodeGroup(b); err == nil {
		t.Fatal("a group value of an unknown version decoded")
	}
	k := encodeKey(recordKey{kind: kindGroup, tenant: "t", group: "g"})
	if _, err := decodeKey(append(k, 0)); err == nil {
		t.Fatal("a key with trailing bytes decoded")
	}
}

// FuzzDecodeRecords feeds arbitrary bytes to the offsets-partition
// decoders (record batches, keys, offset, group and import values). Invariants:
// no panic, no allocation beyond what the input's length justifies (the
// member count is bounded before allocating), and whatever decodes
// re-encodes to the same bytes, so a replay is deterministic.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(encodeKey(recordKey{kind: kindOffset, tenant: "t", group: "g", tp: TopicPartition{TopicID: "x", Partition: 1}}))
	f.Add(encodeKey(recordKey{kind: kindGroup, tenant: "t", group: "g"}))
	f.Add(encodeOffset(Committed{Offset: 5, LeaderEpoch: -1, Metadata: "", CommittedAt: time.UnixMilli(9)}))
	f.Add(encodeGroup(sampleGroup()))
	f.Add(encodeKey(recordKey{kind: kindImport, tenant: "t"}))
	f.Add(encodeImport(importMark{digest: "d", at: time.UnixMilli(7)}))
	f.Add(makeBatch(1, []kv{{key: []byte("k"), value: []byte("v")}, {key: []byte("t")}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := decodeKey(b); err == nil && !bytes.Equal(encodeKey(k), b) {
			t.Fatalf("key %+v re-encodes differently", k)
		}
		if c, err := decodeOffset(b); err == nil && !bytes.Equal(encodeOffset(c), b) {
			t.Fatalf("offset %+v re-encodes differently", c)
		}
		if g, err := decodeGroup(b); err == nil && !bytes.Equal(encodeGroup(g), b) {
			t.Fatalf("group %+v re-encodes differently", g)
		}
		if m, err := decodeImport(b); err == nil && !bytes.Equal(encodeImport(m), b) {
			t.Fatalf("import marker %+v re-encodes differently", m)
		}
		_, _ = eachRecord(b, func(int64, kv) error { return nil })
	})
}
