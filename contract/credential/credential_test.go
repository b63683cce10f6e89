package credential

import (
	"strings"
	"testing"
)

func TestAPIKeyRoundTrip(t *testing.T) {
	id, secret := NewAPIKey()
	if !ValidKeyID(id) {
		t.Fatalf("ValidKeyID(%q) = false", id)
	}
	if strings.Contains(id, secret) || len(secret) < 40 {
		t.Fatalf("secret %q too short or inside id", secret)
	}
	h := HashSecret(secret)
	if !CheckSecret(h, secret) {
		t.Fatal("CheckSecret rejects the right secret")
	}
	if CheckSecret(h, secret+"x") || CheckSecret(h, "") {
		t.Fatal("CheckSecret accepts a wrong secret")
	}
	id2, secret2 := NewAPIKey()
	if id == id2 || secret == secret2 {
		t.Fatal("two keys are equal")
	}
}

func TestValidKeyID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		want bool
	}{
		{"empty", "", false},
		{"prefix only", "SLK", false},
		{"lowercase body", "SLKabcdefghijklmnop", false},
		{"wrong prefix", "ABCAAAAAAAAAAAAAAAA", false},
		{"good", "SLKAAAAAAAAAAAAAAAA", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidKeyID(tc.id); got != tc.want {
				t.Fatalf("ValidKeyID(%q) = %v", tc.id, got)
			}
		})
	}
}

func TestPassword(t *testing.T) {
	h := HashPassword("correct horse 1")
	if strings.Contains(h, "correct") {
		t.Fatal("hash contains the password")
	}
	if !CheckPassword(h, "correct horse 1") {
		t.Fatal("right password rejected")
	}
	if CheckPassword(h, "correct horse 2") {
		t.Fatal("wrong password accepted")
	}
	if HashPassword("correct horse 1") == h {
		t.Fatal("hashes are not salted")
	}
	for _, bad := range []string{"", "$argon2id$v=19$m=1,t=1,p=1$$", "plaintext", "$argon2id$v=1$m=1,t=1,p=1$AAAA$AAAA"} {
		if CheckPassword(bad, "x") {
			t.Fatalf("CheckPassword(%q) accepted", bad)
		}
	}
}

func TestPasswordRules(t *testing.T) {
	for _, tc := range []struct {
		pw string
		ok bool
	}{
		{"short1", false},
		{"onlyletterslong", false},
		{"1234567890123", false},
		{"letters and 1 digit", true},
		{strings.Repeat("a1", 200), false},
	} {
		if err := CheckPasswordRules(tc.pw); (err == nil) != tc.ok {
			t.Errorf("CheckPasswordRules(%q) = %v, want ok=%v", tc.pw, err, tc.ok)
		}
	}
}
