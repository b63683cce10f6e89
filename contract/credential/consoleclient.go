package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"strings"
)

// ConsoleClientHeader names the browser behind a console's call to the API:
// "<address> <tag>", the tag an HMAC of the address under a secret that only
// the console and the control plane of one deployment share. The API keys
// its sign-in and signup limits by that address when the tag checks out and
// by the caller's own address otherwise, so nobody but the console can name
// another address.
const ConsoleClientHeader = "Sluice-Console-Client"

// MinConsoleSecretLen is the shortest secret SignConsoleClient accepts.
const MinConsoleSecretLen = 32

// SignConsoleClient returns the ConsoleClientHeader value naming addr (an IP
// address), or "" when addr is not one.
func SignConsoleClient(secret []byte, addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil {
		return ""
	}
	a := ip.String()
	return a + " " + consoleClientTag(secret, a)
}

// CheckConsoleClient returns the address a ConsoleClientHeader value names,
// if its tag is right under secret (compared in constant time).
func CheckConsoleClient(secret []byte, value string) (string, bool) {
	if len(secret) < MinConsoleSecretLen {
		return "", false
	}
	addr, tag, ok := strings.Cut(value, " ")
	if !ok {
		return "", false
	}
	ip := net.ParseIP(addr)
	if ip == nil || ip.String() != addr {
		return "", false
	}
	if !hmac.Equal([]byte(tag), []byte(consoleClientTag(secret, addr))) {
		return "", false
	}
	return addr, true
}

func consoleClientTag(secret []byte, addr string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sluice-console-client\x00" + addr))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
