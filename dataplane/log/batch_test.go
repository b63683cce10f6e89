package log

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

func TestValidateBatch(t *testing.T) {
	good := makeBatch(3, 20, 1000, 7)
	mut := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	cases := []struct {
		name   string
		b      []byte
		client bool
		want   error
	}{
		{name: "good", b: good},
		{name: "good client", b: good, client: true},
		{name: "short", b: good[:40], want: ErrCorruptBatch},
		{name: "magic 1", b: mut(func(b []byte) []byte { b[offMagic] = 1; return b }), want: ErrInvalidMagic},
		{name: "length beyond buffer", b: good[:len(good)-1], want: ErrCorruptBatch},
		{name: "trailing bytes", b: append(append([]byte(nil), good...), 0), want: ErrCorruptBatch},
		{name: "crc flipped", b: mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), want: ErrCorruptBatch},
		{name: "zero records", b: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offNumRecords:], 0)
			return recrc(b)
		}), want: ErrCorruptBatch},
		{name: "delta disagrees", b: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastDelta:], 5)
			return recrc(b)
		}), want: ErrCorruptBatch},
		{name: "offset and epoch outside crc", b: mut(func(b []byte) []byte { stamp(b, 99, 4); return b })},
		{name: "client base offset", b: mut(func(b []byte) []byte { stamp(b, 99, 4); return b }), client: true, want: ErrCorruptBatch},
		{name: "client control batch", b: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[offAttributes:], attrControl)
			return recrc(b)
		}), client: true, want: ErrControlBatch},
		{name: "client codec 5", b: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[offAttributes:], 5)
			return recrc(b)
		}), client: true, want: ErrCorruptBatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			validate := ValidateBatch
			if tc.client {
				validate = ValidateClientBatch
			}
			h, err := validate(tc.b)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil && (h.NumRecords != 3 || h.Size() != int64(len(tc.b)) || h.MaxTimestamp != 1002) {
				t.Fatalf("header %+v", h)
			}
		})
	}
}

// A batch appended as Checked has its framing checked but is not hashed
// again; unchecked, the same bytes are refused for their CRC.
func TestAppendCheckedSkipsTheCRC(t *testing.T) {
	l, err := Open(context.Background(), Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	bad := makeBatch(2, 16, 1, 1)
	bad[len(bad)-1] ^= 0xff
	if _, _, err := l.AppendBatches([]Batch{{Data: bad}}); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("unchecked batch with a bad CRC: %v, want ErrCorruptBatch", err)
	}
	if _, _, err := l.AppendBatches([]Batch{{Data: bad, Checked: true}}); err != nil {
		t.Fatalf("checked batch hashed again: %v", err)
	}
	short := makeBatch(2, 16, 1, 2)
	if _, _, err := l.AppendBatches([]Batch{{Data: short[:len(short)-1], Checked: true}}); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("a checked batch's framing was not checked: %v", err)
	}
}
