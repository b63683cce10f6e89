package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A request one broker forwards to another (to the partition's leader,
// the group's coordinator, or a coordinator's own read of a partition
// another broker leads) was admitted where it entered the cell, so the
// receiving broker must not count it against the tenant's request rate
// again: a group fetch reads every assigned partition on its leader, and
// charging each of those reads made a tenant's ordinary consumer loop
// exhaust its rate on brokers it never called.
//
// The exemption must not be available to tenants. A forward carries the
// tenant's own credentials (the receiver authenticates and authorizes the
// tenant again) and a hop header, both of which a tenant can send itself;
// so a forward also carries a proof that only the cell's brokers can
// make: an HMAC-SHA256, under a key the brokers share (Config.PeerKey),
// of the forwarding node, the time, the method, the request URI and the
// tenant's key id. The receiver accepts it only for the key id the
// request authenticates as and only within maxForwardAge of the time it
// names. A request without a valid proof is a tenant's request, charged
// in full; without a PeerKey every request is. The body is not covered:
// whoever could replay a proof within its minute, by reading the traffic
// between brokers, reads the tenant's secret there as well.

// forwardedByHeader carries the proof: "<node>.<unix ms>.<mac>".
const forwardedByHeader = "Sluice-Forwarded-By"

// maxForwardAge is how far from the receiver's clock the time in a proof
// may be: the forward's own latency plus the clock skew between brokers.
const maxForwardAge = time.Minute

// minPeerKey is the shortest PeerKey accepted, in bytes.
const minPeerKey = 16

// PeerKeyFrom derives the HTTP forwarding key (Config.PeerKey) from a
// secret every broker of a cell holds, such as its cell key's secret.
// The secret itself is not used as the key, so the proofs reveal
// nothing about it.
func PeerKeyFrom(secret string) []byte {
	if secret == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sluice http data api forwarding key v1"))
	return m.Sum(nil)
}

// forwardMAC is the proof's MAC.
func forwardMAC(key []byte, node int, ms int64, method, uri, keyID string) []byte {
	m := hmac.New(sha256.New, key)
	for _, f := range []string{"sluice-forward v1", strconv.Itoa(node), strconv.FormatInt(ms, 10), method, uri, keyID} {
		m.Write([]byte(f))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// signForward sets the proof on a request this broker forwards; without
// a PeerKey it sets none.
func (s *Server) signForward(req *http.Request, keyID string) {
	if len(s.cfg.PeerKey) == 0 {
		return
	}
	ms := s.cfg.Now().UnixMilli()
	mac := forwardMAC(s.cfg.PeerKey, s.cfg.NodeID, ms, req.Method, req.URL.RequestURI(), keyID)
	req.Header.Set(forwardedByHeader, strconv.Itoa(s.cfg.NodeID)+"."+strconv.FormatInt(ms, 10)+"."+base64.RawURLEncoding.EncodeToString(mac))
}

// fromPeer reports whether r carries a valid proof that a broker of the
// cell forwarded it for the tenant key keyID. The URI checked is the
// request line's, as received (middleware may rewrite r.URL).
func (s *Server) fromPeer(r *http.Request, keyID string) bool {
	h := r.Header.Get(forwardedByHeader)
	if h == "" || len(s.cfg.PeerKey) == 0 {
		return false
	}
	parts := strings.Split(h, ".")
	if len(parts) != 3 {
		return false
	}
	node, err1 := strconv.Atoi(parts[0])
	ms, err2 := strconv.ParseInt(parts[1], 10, 64)
	mac, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || node < 1 || node == s.cfg.NodeID {
		return false
	}
	if age := s.cfg.Now().Sub(time.UnixMilli(ms)); age > maxForwardAge || age < -maxForwardAge {
		return false
	}
	return hmac.Equal(mac, forwardMAC(s.cfg.PeerKey, node, ms, r.Method, r.RequestURI, keyID))
}
