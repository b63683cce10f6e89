package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestForwardProof: only a request signed with the cell's peer key, for
// the key id it authenticates as, the method and URI it was sent with,
// and within a minute of its time, counts as forwarded by a broker; a
// tenant cannot claim it with headers of its own.
func TestForwardProof(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	key := PeerKeyFrom("cell-key-secret")
	sender := &Server{cfg: Config{NodeID: 2, PeerKey: key, Now: func() time.Time { return now }}}
	const uri = "/v1/topics/jobs/partitions/0/messages?offset=5&max_bytes=100"
	signed := func(method, uri, keyID string) *http.Request {
		out := httptest.NewRequest(method, "http://broker-1"+uri, nil)
		sender.signForward(out, keyID)
		// What the receiving broker's server sees: the request line as sent.
		in := httptest.NewRequest(method, uri, nil)
		in.Header = out.Header.Clone()
		return in
	}
	receiver := func(key []byte, at time.Time) *Server {
		return &Server{cfg: Config{NodeID: 1, PeerKey: key, Now: func() time.Time { return at }}}
	}
	for _, tc := range []struct {
		name string
		srv  *Server
		req  func() *http.Request
		want bool
	}{
		{"signed by a peer", receiver(key, now), func() *http.Request { return signed("GET", uri, "SLKTENANT") }, true},
		{"a few seconds later", receiver(key, now.Add(5*time.Second)), func() *http.Request { return signed("GET", uri, "SLKTENANT") }, true},
		{"no proof, only the hop header", receiver(key, now), func() *http.Request {
			r := httptest.NewRequest("GET", uri, nil)
			r.Header.Set(hopsHeader, "1")
			return r
		}, false},
		{"a made-up proof", receiver(key, now), func() *http.Request {
			r := httptest.NewRequest("GET", uri, nil)
			r.Header.Set(forwardedByHeader, "2.1800000000000."+strings.Repeat("A", 43))
			return r
		}, false},
		{"signed for another key id", receiver(key, now), func() *http.Request { return signed("GET", uri, "SLKOTHER") }, false},
		{"another uri", receiver(key, now), func() *http.Request {
			r := signed("GET", uri, "SLKTENANT")
			in := httptest.NewRequest("GET", strings.Replace(uri, "offset=5", "offset=6", 1), nil)
			in.Header = r.Header
			return in
		}, false},
		{"another method", receiver(key, now), func() *http.Request {
			r := signed("GET", uri, "SLKTENANT")
			in := httptest.NewRequest("POST", uri, nil)
			in.Header = r.Header
			return in
		}, false},
		{"stale", receiver(key, now.Add(2*time.Minute)), func() *http.Request { return signed("GET", uri, "SLKTENANT") }, false},
		{"another cell's key", receiver(PeerKeyFrom("another secret"), now), func() *http.Request { return signed("GET", uri, "SLKTENANT") }, false},
		{"receiver without a key", receiver(nil, now), func() *http.Request { return signed("GET", uri, "SLKTENANT") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.srv.fromPeer(tc.req(), "SLKTENANT"); got != tc.want {
				t.Fatalf("fromPeer = %v, want %v", got, tc.want)
			}
		})
	}
	// A broker without a peer key signs nothing.
	r := httptest.NewRequest("GET", "http://broker-1"+uri, nil)
	(&Server{cfg: Config{NodeID: 2, Now: time.Now}}).signForward(r, "SLKTENANT")
	if h := r.Header.Get(forwardedByHeader); h != "" {
		t.Fatalf("signed without a key: %q", h)
	}
}
