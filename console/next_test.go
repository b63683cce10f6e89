package console

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/controlplane"
)

// nextCases are crafted post-login destinations: only console paths survive.
var nextCases = []struct {
	name, next, want string
}{
	{"empty", "", "/"},
	{"plain page", "/topics", "/topics"},
	{"page with query", "/topics/orders?saved=1", "/topics/orders?saved=1"},
	{"escaped group name", "/groups/a%2Fb", "/groups/a%2Fb"},
	{"tab after slash", "/\t/evil.example/x", "/"},
	{"newline after slash", "/\n/evil.example/x", "/"},
	{"carriage return", "/\r\n/evil.example", "/"},
	{"tab inside", "/top\tics", "/"},
	{"nul", "/\x00/evil.example", "/"},
	{"space", "/ /evil.example", "/"},
	{"double slash", "//evil", "/"},
	{"triple slash", "///evil", "/"},
	{"backslash", "/\\evil", "/"},
	{"two backslashes", "\\\\evil", "/"},
	{"backslash inside", "/topics\\..\\..\\evil", "/"},
	{"scheme", "https://evil", "/"},
	{"scheme relative path", "https:/evil", "/"},
	{"javascript", "javascript:alert(1)", "/"},
	{"encoded double slash", "%2F%2Fevil", "/"},
	{"encoded slashes after slash", "/%2F%2Fevil", "/"},
	{"encoded slash then slash", "/%2f/evil", "/"},
	{"encoded backslash", "/%5Cevil", "/"},
	{"encoded tab", "/%09/evil.example/x", "/"},
	{"dot segments", "/./evil", "/"},
	{"dot dot", "/topics/../../evil", "/"},
	{"user info", "//user@evil", "/"},
	{"fragment", "/topics#x", "/"},
	{"relative", "topics", "/"},
	{"api route", "/v1/me", "/"},
	{"internal route", "/internal/v1/cells/x/state", "/"},
	{"unicode line separator", "/\u2028/evil", "/"},
	{"c1 control", "/\u0085/evil", "/"},
	{"invalid utf-8", "/\xff/evil", "/"},
}

func TestSafeNext(t *testing.T) {
	for _, tc := range nextCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := safeNext(tc.next); got != tc.want {
				t.Fatalf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
			}
		})
	}
}

// TestLoginNextRedirect follows each crafted value through the real login
// page and sign-in: the form keeps only a safe value, and the redirect after
// signing in never leaves the console.
func TestLoginNextRedirect(t *testing.T) {
	// Every case signs in once; the sign-in limit is not under test here.
	e := newEnv(t, envOptions{plane: func(c *controlplane.Config) { c.LoginBurst = 1000 }})
	owner := e.browser()
	owner.signup("next-co")
	for _, tc := range nextCases {
		t.Run(tc.name, func(t *testing.T) {
			b := e.browser()
			resp, body := b.get("/login?next=" + url.QueryEscape(tc.next))
			wantStatus(t, resp, body, http.StatusOK)
			resp, body = b.post("/login", url.Values{"email": {"next-co@example.com"}, "password": {"password-next-co-1"},
				"next": {tc.next}})
			wantStatus(t, resp, body, http.StatusSeeOther)
			if loc := resp.Header.Get("Location"); loc != tc.want {
				t.Fatalf("sign-in with next=%q redirects to %q, want %q", tc.next, loc, tc.want)
			}
		})
	}
}
