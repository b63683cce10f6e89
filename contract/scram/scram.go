// Package scram holds the math of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677, as Kafka's KIP-84 uses them): deriving the salted credentials the
// control plane stores for an API key, and the server side of one exchange,
// which a broker runs. It does no I/O and imports nothing of Sluice's; the
// control plane and the data plane import it.
//
// Only channel binding "n" is served (the client neither supports nor uses
// it), as Kafka does.
package scram

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"golang.org/x/crypto/pbkdf2"
)

// Mechanism is one SCRAM hash.
type Mechanism struct {
	// Name is the SASL mechanism name clients ask for.
	Name string
	hash func() hash.Hash
}

// The mechanisms Sluice serves.
var (
	SHA256 = Mechanism{Name: "SCRAM-SHA-256", hash: sha256.New}
	SHA512 = Mechanism{Name: "SCRAM-SHA-512", hash: sha512.New}
)

// Mechanisms lists the served mechanisms, SHA-256 first.
var Mechanisms = []Mechanism{SHA256, SHA512}

// ByName returns the mechanism of a SASL mechanism name.
func ByName(name string) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return Mechanism{}, false
}

// Iterations is the PBKDF2 iteration count of new credentials: 4096, the
// minimum Kafka accepts for SCRAM-SHA-256 and RFC 7677's recommendation.
// API key secrets carry 256 bits of entropy, so the count guards against
// nothing a brute force could reach; it is there because clients expect it.
const Iterations = 4096

// MinIterations is the lowest iteration count a stored credential may have.
const MinIterations = 4096

const saltLen = 24

// Credential is what a server stores to check one mechanism's proofs: never
// the secret itself.
type Credential struct {
	Mechanism  string
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// Derive returns a credential for secret with a fresh random salt and
// Iterations.
func Derive(m Mechanism, secret string) Credential {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("scram: read random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return DeriveWith(m, secret, salt, Iterations)
}

// DeriveWith returns the credential for secret with the given salt and
// iteration count.
func DeriveWith(m Mechanism, secret string, salt []byte, iterations int) Credential {
	salted := pbkdf2.Key([]byte(secret), salt, iterations, m.hash().Size(), m.hash)
	clientKey := m.mac(salted, []byte("Client Key"))
	stored := m.hash()
	stored.Write(clientKey)
	return Credential{Mechanism: m.Name, Salt: salt, Iterations: iterations,
		StoredKey: stored.Sum(nil), ServerKey: m.mac(salted, []byte("Server Key"))}
}

func (m Mechanism) mac(key, msg []byte) []byte {
	h := hmac.New(m.hash, key)
	h.Write(msg)
	return h.Sum(nil)
}

// Errors of an exchange. A caller tells the client which one happened; none
// reveals anything of the stored credential.
var (
	ErrMalformed      = errors.New("the SCRAM message is malformed")
	ErrChannelBinding = errors.New("SCRAM channel binding is not supported; use gs2 header \"n,,\"")
	ErrNonce          = errors.New("the SCRAM nonce does not match")
	ErrProof          = errors.New("the SCRAM proof is wrong")
	ErrOutOfOrder     = errors.New("the SCRAM message came out of order")
)

// Server is the server side of one SCRAM exchange:
//
//	client-first → (Start) → server-first → client-final → (Finish) → server-final
//
// Start parses the client's first message and names the user; the caller
// looks up the user's credential and passes it to Challenge, which answers
// with the server-first message. Finish checks the client's proof and
// answers with the server-final message. A Server serves one exchange.
type Server struct {
	mech Mechanism
	step int

	gs2Header       string // "n,," or "n,a=<authzid>,"
	clientFirstBare string
	user            string
	clientNonce     string
	nonce           string // client nonce + server nonce
	serverFirst     string
	cred            Credential

	serverNonce func() string // a test pins it
}

// NewServer starts an exchange of mechanism m.
func NewServer(m Mechanism) *Server {
	return &Server{mech: m, serverNonce: randomNonce}
}

func randomNonce() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("scram: read random bytes: %v", err))
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// Start parses the client-first message and returns the user it names.
// Extensions (such as Kafka's tokenauth) are accepted and ignored, except
// the reserved "m".
func (s *Server) Start(clientFirst []byte) (user string, err error) {
	if s.step != 0 {
		return "", ErrOutOfOrder
	}
	s.step = 1
	msg := string(clientFirst)
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return "", ErrMalformed
	}
	switch {
	case flag == "n":
	case flag == "y" || strings.HasPrefix(flag, "p="):
		return "", ErrChannelBinding
	default:
		return "", ErrMalformed
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", ErrMalformed
	}
	var authzid string
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return "", ErrMalformed
		}
		if authzid, ok = unescape(a); !ok {
			return "", ErrMalformed
		}
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return "", ErrMalformed
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return "", ErrMalformed
	}
	n, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return "", ErrMalformed
	}
	if user, ok = unescape(n); !ok || user == "" {
		return "", ErrMalformed
	}
	if authzid != "" && authzid != user {
		return "", fmt.Errorf("%w: the authorization id must be empty or equal the username", ErrMalformed)
	}
	r, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !printable(r) {
		return "", ErrMalformed
	}
	s.gs2Header = flag + "," + authz + ","
	s.clientFirstBare = bare
	s.user = user
	s.clientNonce, s.nonce = r, r
	return user, nil
}

// Challenge returns the server-first message for the user's credential.
func (s *Server) Challenge(cred Credential) ([]byte, error) {
	if s.step != 1 || s.user == "" {
		return nil, ErrOutOfOrder
	}
	if cred.Mechanism != s.mech.Name {
		return nil, fmt.Errorf("credential of %s for a %s exchange: %w", cred.Mechanism, s.mech.Name, ErrOutOfOrder)
	}
	s.step = 2
	s.cred = cred
	s.nonce += s.serverNonce()
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.serverFirst), nil
}

// Finish checks the client-final message and returns the server-final
// message, which proves to the client that the server knows the
// credential. Any error means the client is not authenticated.
func (s *Server) Finish(clientFinal []byte) ([]byte, error) {
	if s.step != 2 {
		return nil, ErrOutOfOrder
	}
	s.step = 3
	msg := string(clientFinal)
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, ErrMalformed
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, ErrMalformed
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return nil, ErrMalformed
	}
	c, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, ErrMalformed
	}
	cbind, err := base64.StdEncoding.DecodeString(c)
	if err != nil {
		return nil, ErrMalformed
	}
	if string(cbind) != s.gs2Header {
		return nil, ErrChannelBinding
	}
	r, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok {
		return nil, ErrMalformed
	}
	// librdkafka (through at least 2.0) sends the client nonce again in
	// front of the combined one; Kafka accepts any nonce that ends with
	// the combined one, and so, narrower, does this: exactly that prefix.
	if subtle.ConstantTimeCompare([]byte(r), []byte(s.nonce)) != 1 &&
		subtle.ConstantTimeCompare([]byte(r), []byte(s.clientNonce+s.nonce)) != 1 {
		return nil, ErrNonce
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSig := s.mech.mac(s.cred.StoredKey, authMessage)
	if len(proof) != len(clientSig) {
		return nil, ErrProof
	}
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSig)
	h := s.mech.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, ErrProof
	}
	serverSig := s.mech.mac(s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

// unescape decodes a saslname: "=2C" is ',' and "=3D" is '='; any other
// '=' is malformed.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// printable reports whether s is a valid nonce: printable ASCII but ','.
func printable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}
