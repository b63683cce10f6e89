package transport

import (
	"bytes"
	"testing"
)

// FuzzReadHello feeds arbitrary bytes to the reader of the hello that
// opens every accepted Raft connection (magic, version, lane, the dialling
// broker's id). It is the only decoder that reads bytes from anyone who
// reaches the port before the TLS handshake authenticates them; the same
// reader then reads the hello repeated inside TLS.
//
// Invariants:
//   - readHello never panics and never reads a broker id longer than
//     maxGroupIDLen, whatever length prefix it is sent;
//   - an accepted hello is of the current version (a version 1 hello,
//     which was never followed by TLS, is refused);
//   - an accepted hello names a known lane, and writeHello of what it
//     read reads back as the same hello (not byte for byte: a length may
//     come as a non-minimal varint).
func FuzzReadHello(f *testing.F) {
	for _, lane := range []laneKind{laneControl, laneAppend, laneSnapshot, laneMirror} {
		var b bytes.Buffer
		if err := writeHello(&b, lane, "3"); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
		f.Add(append(b.Bytes(), "trailing frame bytes"...))
		f.Add(b.Bytes()[:b.Len()-1])
	}
	f.Add([]byte("SLRT\x02\x02\x80\x00"))          // non-minimal length varint
	f.Add([]byte("SLRT\x01\x01\x01a"))             // version 1: refused
	f.Add([]byte("SLRT\x02\x03\x01a\x16\x03\x01")) // then a TLS ClientHello
	f.Add([]byte("SLRT\x01\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte("SLRT\x02\x01\x01a"))
	f.Add([]byte("SLRT\x01\x09\x01a"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufioReaderOf(in)
		lane, from, err := readHello(r)
		if err != nil {
			return
		}
		if in[4] != helloVersion {
			t.Fatalf("accepted a hello of version %d", in[4])
		}
		if lane < laneControl || lane > laneMirror {
			t.Fatalf("accepted lane %d", lane)
		}
		if len(from) > maxGroupIDLen {
			t.Fatalf("accepted a broker id of %d bytes", len(from))
		}
		var b bytes.Buffer
		if err := writeHello(&b, lane, from); err != nil {
			t.Fatal(err)
		}
		lane2, from2, err := readHello(bufioReaderOf(b.Bytes()))
		if err != nil || lane2 != lane || from2 != from {
			t.Fatalf("hello (%v, %q) re-encodes to %q, which reads as (%v, %q, %v)", lane, from, b.Bytes(), lane2, from2, err)
		}
	})
}
