package kafka_test

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGarbageFrames sends random frames, truncated requests and requests
// with random bodies, before and after authentication, each on its own
// connection, then half-closes it. Every connection must end in a response
// or a close within a bounded time; nothing may panic (startBroker's log
// watch fails the test otherwise), and the server must keep serving.
func TestGarbageFrames(t *testing.T) {
	b := startBroker(t, brokerOpts{authTimeout: 3 * time.Second, maxRequestBytes: 1 << 20})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 2, nil)
	b.waitForKey(t, a)
	rng := rand.New(rand.NewPCG(1, 2))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("garbage"))
	valid := func() []byte {
		keys := []int16{0, 1, 2, 3, 17, 18, 32, 36, 19, 11}
		r := kmsg.RequestForKey(keys[rng.IntN(len(keys))])
		r.SetVersion(int16(rng.IntN(int(r.MaxVersion()) + 1)))
		return f.AppendRequest(nil, r, rng.Int32())
	}
	kinds := []struct {
		name string
		gen  func() []byte
	}{
		{"random bytes", func() []byte {
			b := make([]byte, rng.IntN(64))
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			return b
		}},
		{"random frame", func() []byte {
			body := make([]byte, rng.IntN(200))
			for i := range body {
				body[i] = byte(rng.UintN(256))
			}
			return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
		}},
		{"truncated request", func() []byte {
			v := valid()
			return v[:rng.IntN(len(v))]
		}},
		{"request with a cut body", func() []byte {
			v := valid()
			n := 4 + rng.IntN(len(v)-4)
			v = v[:n]
			binary.BigEndian.PutUint32(v, uint32(n-4))
			return v
		}},
		{"valid header, random body", func() []byte {
			v := valid()
			for i := 14; i < len(v); i++ {
				if rng.IntN(3) == 0 {
					v[i] = byte(rng.UintN(256))
				}
			}
			return v
		}},
		{"huge or negative size", func() []byte {
			return binary.BigEndian.AppendUint32(nil, uint32(rng.Int32N(1<<30))|0x00f00000|uint32(rng.IntN(2))<<31)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for i := range 40 {
				rc := dialRaw(t, b.addr)
				if i%2 == 1 {
					rc.authenticate(a.KeyID, a.Secret)
				}
				if _, err := rc.c.Write(k.gen()); err != nil {
					continue // already closed by the server
				}
				rc.c.(*net.TCPConn).CloseWrite()
				rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err := io.Copy(io.Discard, rc.c)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("case %d: connection neither answered nor closed within 10 s", i)
				}
				rc.c.Close()
			}
		})
	}
	t.Run("idle before authentication", func(t *testing.T) {
		// Sends nothing: closed once AuthTimeout (3 s here) passes.
		dialRaw(t, b.addr).expectClosed(10 * time.Second)
	})
	rc := dialRaw(t, b.addr)
	if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}
