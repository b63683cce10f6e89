package journal

import (
	"bytes"
	"testing"
)

// FuzzDecodeFile feeds arbitrary bytes to the decoder of a journal file.
// Invariants: it never panics; every record it returns has a path that
// stays inside the data directory and a known kind; and the records
// encode back, under the header's generation, to exactly the bytes that
// follow the header, up to where decoding stopped.
func FuzzDecodeFile(f *testing.F) {
	seed := encodeHeader(7)
	seed = appendRecord(seed, 7, record{kind: kindWrite, path: "a/b", off: 3, data: []byte("xyz")})
	seed = appendRecord(seed, 7, record{kind: kindFence, path: "a"})
	f.Add(seed)
	f.Add(append(seed, appendRecord(nil, 6, record{kind: kindWrite, path: "a/c"})...))
	f.Add(encodeHeader(1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, recs := decodeFile(b)
		if gen == 0 {
			if len(recs) != 0 {
				t.Fatalf("records in a file without a header: %d", len(recs))
			}
			return
		}
		var again []byte
		for _, r := range recs {
			if err := checkPath(r.path); err != nil {
				t.Fatal(err)
			}
			if r.kind != kindWrite && r.kind != kindFence {
				t.Fatalf("kind %d", r.kind)
			}
			again = appendRecord(again, gen, r)
		}
		if !bytes.HasPrefix(b[headerSize:], again) {
			t.Fatal("records do not encode back to the bytes they came from")
		}
	})
}
