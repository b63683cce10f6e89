// Package credential makes and checks Sluice's secrets: API keys (id plus a
// high-entropy secret, stored as a SHA-256 hash), session tokens, and user
// passwords (argon2id). Comparison is constant-time. The control plane and the
// data plane (which checks SASL/PLAIN against cached key hashes) import it.
package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// KeyIDPrefix starts every API key id and CellKeyIDPrefix every cell key id,
// so a leaked credential is recognisable.
const (
	KeyIDPrefix     = "SLK"
	CellKeyIDPrefix = "SLC"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewAPIKey returns a fresh key id (the SASL username) and secret (the SASL
// password). The secret carries 256 bits of entropy, so a plain SHA-256 hash
// is a sound way to store it and fast enough to check on every connection.
func NewAPIKey() (id, secret string) { return newKey(KeyIDPrefix) }

// NewCellKey returns a fresh credential for the brokers of a cell.
func NewCellKey() (id, secret string) { return newKey(CellKeyIDPrefix) }

func newKey(prefix string) (id, secret string) {
	return prefix + idEncoding.EncodeToString(random(10)), base64.RawURLEncoding.EncodeToString(random(32))
}

// ValidKeyID reports whether s has the shape of an API key id.
func ValidKeyID(s string) bool { return validID(KeyIDPrefix, s) }

// ValidCellKeyID reports whether s has the shape of a cell key id.
func ValidCellKeyID(s string) bool { return validID(CellKeyIDPrefix, s) }

func validID(prefix, s string) bool {
	if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+16 {
		return false
	}
	_, err := idEncoding.DecodeString(s[len(prefix):])
	return err == nil
}

// HashSecret returns the stored form of an API key secret or session token.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// CheckSecret reports, in constant time, whether secret hashes to hash.
func CheckSecret(hash []byte, secret string) bool {
	h := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(hash, h[:]) == 1
}

// NewToken returns a random session token.
func NewToken() string { return base64.RawURLEncoding.EncodeToString(random(32)) }

// NewID returns a random resource id with the given prefix, e.g. "tn_".
func NewID(prefix string) string {
	return prefix + strings.ToLower(idEncoding.EncodeToString(random(10)))
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("credential: read random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return b
}

// Password rules.
const (
	MinPasswordLen = 10
	MaxPasswordLen = 256
)

// ErrWeakPassword explains the password rules.
var ErrWeakPassword = fmt.Errorf("a password needs %d to %d characters, with at least one letter and one digit or symbol", MinPasswordLen, MaxPasswordLen)

// CheckPasswordRules returns ErrWeakPassword when pw breaks the rules.
func CheckPasswordRules(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordLen || n > MaxPasswordLen {
		return ErrWeakPassword
	}
	var letter, other bool
	for _, r := range pw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letter = true
		default:
			other = true
		}
	}
	if !letter || !other {
		return ErrWeakPassword
	}
	return nil
}

// argon2id parameters (OWASP's minimum profile: 19 MiB, 2 passes).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// HashPassword returns an encoded argon2id hash of pw.
func HashPassword(pw string) string {
	salt := random(16)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

var errBadHash = errors.New("not an argon2id hash")

// CheckPassword reports whether pw matches the encoded hash, in constant time.
func CheckPassword(encoded, pw string) bool {
	ok, err := checkPassword(encoded, pw)
	return err == nil && ok
}

func checkPassword(encoded, pw string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var mem, iters uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iters, &threads); err != nil {
		return false, errBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(pw), salt, iters, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// DummyPasswordCheck spends the time of a real check, so a login for an
// unknown email takes as long as one with a wrong password.
func DummyPasswordCheck(pw string) {
	_ = argon2.IDKey([]byte(pw), dummySalt, argonTime, argonMemory, argonThreads, argonKeyLen)
}

var dummySalt = random(16)
