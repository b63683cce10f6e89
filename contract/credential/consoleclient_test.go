package credential

import (
	"bytes"
	"testing"
)

func TestConsoleClient(t *testing.T) {
	secret := bytes.Repeat([]byte("k"), MinConsoleSecretLen)
	other := bytes.Repeat([]byte("o"), MinConsoleSecretLen)
	good := SignConsoleClient(secret, "192.0.2.7")
	if addr, ok := CheckConsoleClient(secret, good); !ok || addr != "192.0.2.7" {
		t.Fatalf("own value: %q %v", addr, ok)
	}
	for _, tc := range []struct{ name, value string }{
		{"empty", ""},
		{"address only", "192.0.2.7"},
		{"other secret", SignConsoleClient(other, "192.0.2.7")},
		{"tag of another address", "192.0.2.8 " + good[len("192.0.2.7 "):]},
		{"not an address", "evil " + consoleClientTag(secret, "evil")},
		{"unnormalised address", "::ffff:192.0.2.7 " + consoleClientTag(secret, "::ffff:192.0.2.7")},
		{"extra field", good + " x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if addr, ok := CheckConsoleClient(secret, tc.value); ok {
				t.Fatalf("accepted %q as %q", tc.value, addr)
			}
		})
	}
	if _, ok := CheckConsoleClient(secret[:MinConsoleSecretLen-1], SignConsoleClient(secret[:MinConsoleSecretLen-1], "192.0.2.7")); ok {
		t.Fatal("accepted a short secret")
	}
	if v := SignConsoleClient(secret, "not-an-ip"); v != "" {
		t.Fatalf("signed a non-address: %q", v)
	}
}
