package kafka_test

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkSASLHandshake is the cost of signing in on a fresh connection:
// dial, SaslHandshake, then SaslAuthenticate with PLAIN (one round trip;
// the broker hashes the secret once) or SCRAM (two round trips; the
// client derives the salted password with PBKDF2 at the key's iteration
// count, the broker checks the proof with HMACs against the StoredKey).
// Client and broker share the process, so ns/op counts both sides' CPU.
func BenchmarkSASLHandshake(b *testing.B) {
	br := startBroker(b, brokerOpts{})
	a := br.cp.Signup("handshake", "developer")
	br.waitForKey(b, a)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		b.Run(mech, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := net.DialTimeout("tcp", br.addr, 5*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				rc := &rawConn{t: b, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))}
				var resp *kmsg.SASLAuthenticateResponse
				if mech == "PLAIN" {
					resp = rc.authenticate(a.KeyID, a.Secret)
				} else {
					resp = scramLogin(b, rc, mech, a.KeyID, a.Secret)
				}
				c.Close()
				if resp.ErrorCode != 0 {
					b.Fatalf("%s sign-in: code %d %v", mech, resp.ErrorCode, resp.ErrorMessage)
				}
			}
		})
	}
}
