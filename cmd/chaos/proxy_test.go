package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func hello(from string) []byte {
	b := append(helloMagic[:], helloVersion, 1)
	b = binary.AppendUvarint(b, uint64(len(from)))
	return append(b, from...)
}

// echoServer answers every connection by echoing what it reads, after
// checking that the hello arrived intact.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, _, err := readHello(br); err != nil {
					return
				}
				_, _ = io.Copy(c, br)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialAs connects to a proxy as broker node id, sends the hello and a ping,
// and reports whether the ping came back.
func dialAs(t *testing.T, addr, node string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(hello(node), "ping"...)); err != nil {
		return false
	}
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	return err == nil && string(buf) == "ping"
}

// The proxy identifies the dialling broker from the transport's hello and
// cuts exactly the pairs it is told to, in both directions, until healed;
// a cut closes connections already open.
func TestNetworkCutsPairs(t *testing.T) {
	n := NewNetwork(slog.New(slog.DiscardHandler))
	t.Cleanup(n.Close)
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := n.Listen(i, string(rune('1'+i)), echoServer(t))
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	reach := func(from, to int) bool { return dialAs(t, addrs[to], string(rune('1'+from))) }
	type link struct {
		from, to int
		want     bool
	}
	// wantReach checks, after what, that each link's from reaches its to
	// exactly when the link says.
	wantReach := func(what string, links []link) {
		t.Helper()
		for _, l := range links {
			if got := reach(l.from, l.to); got != l.want {
				t.Errorf("after %s: %d reaches %d = %v, want %v", what, l.from, l.to, got, l.want)
			}
		}
	}
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			if a != b && !reach(a, b) {
				t.Fatalf("before any cut: %d cannot reach %d", a, b)
			}
		}
	}
	// An open connection from 0 to 1, cut while open.
	open, err := net.Dial("tcp", addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write(hello("1")); err != nil {
		t.Fatal(err)
	}
	n.Cut(0, 1)
	wantReach("cutting 0-1", []link{{0, 1, false}, {1, 0, false}, {0, 2, true}, {2, 0, true}, {1, 2, true}, {2, 1, true}})
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("a connection open across the cut was not closed: %v", err)
	}
	n.Heal()
	n.Isolate(2, 3)
	wantReach("isolating 2", []link{{0, 1, true}, {1, 0, true}, {0, 2, false}, {2, 0, false}, {1, 2, false}, {2, 1, false}})
	n.Heal()
	if !reach(2, 0) || !reach(1, 2) {
		t.Error("healing did not restore the links")
	}
	if n.Cuts() == 0 {
		t.Error("no cut was counted")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// FuzzReadHello feeds arbitrary connection openings to the proxy's hello
// reader. Invariants: it never panics, never reads a node id over 64
// bytes, and the raw bytes it returns are exactly the bytes it consumed, so
// the broker behind the proxy sees the hello unchanged.
func FuzzReadHello(f *testing.F) {
	f.Add(hello("1"))
	f.Add(append(hello("3"), "frames"...))
	f.Add(hello("")[:5])
	f.Add([]byte("SLRT\x01\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, in []byte) {
		src := bytes.NewReader(in)
		br := bufio.NewReader(src)
		raw, id, err := readHello(br)
		if err != nil {
			return
		}
		if len(id) > 64 {
			t.Fatalf("node id of %d bytes", len(id))
		}
		if consumed := len(in) - br.Buffered() - src.Len(); !bytes.Equal(raw, in[:consumed]) {
			t.Fatalf("raw hello %q, consumed %q", raw, in[:consumed])
		}
	})
}
