package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/credential"
)

// Every browser signs in through the console, which calls the API from its
// own address; the API still limits attempts per browser, because the
// console names each one with the secret only it and the API share.
func TestSignInLimitPerBrowser(t *testing.T) {
	e := newEnv(t)
	e.browser().signup("limits-co")

	// Ten bad attempts from one browser, each for another email, so only
	// the per-address limit counts...
	attacker := e.browserFrom("127.0.0.2")
	attacker.get("/login")
	for i := range 10 {
		resp, body := attacker.post("/login", url.Values{"email": {"guess" + strconv.Itoa(i) + "@example.com"}, "password": {"wrong password 1"}})
		wantStatus(t, resp, body, http.StatusUnauthorized)
	}
	resp, body := attacker.post("/login", url.Values{"email": {"guess-last@example.com"}, "password": {"wrong password 1"}})
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	wantContains(t, body, "too many sign-in attempts")
	// ...lock out that browser only: another one signs in.
	other := e.browserFrom("127.0.0.3")
	other.get("/login")
	resp, body = other.post("/login", url.Values{"email": {"limits-co@example.com"}, "password": {"password-limits-co-1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if other.sessionToken() == "" {
		t.Fatal("the other browser got no session")
	}
	// The operator-key form is limited the same way.
	resp, body = attacker.post("/login/operator", url.Values{"api_key": {e.opKey}})
	wantStatus(t, resp, body, http.StatusTooManyRequests)
}

// A caller of the API itself cannot name another address: a forged console
// header, copied from the console or made up, is ignored and the caller is
// limited by its own address.
func TestForgedConsoleClientIgnored(t *testing.T) {
	e := newEnv(t)
	e.browser().signup("forge-co")
	post := func(from, header, email, password string) int {
		t.Helper()
		b := e.browserFrom(from)
		req, err := http.NewRequest(http.MethodPost, e.url+"/v1/sessions",
			strings.NewReader(`{"email":"`+email+`","password":"`+password+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set(credential.ConsoleClientHeader, header)
		}
		resp, _ := b.do(req)
		return resp.StatusCode
	}
	forged := []string{
		"127.0.0.9",
		"127.0.0.9 " + strings.Repeat("A", 43),
		credential.SignConsoleClient([]byte(strings.Repeat("x", 32)), "127.0.0.9"),
	}
	for i := range 10 {
		if st := post("127.0.0.4", forged[i%len(forged)], "forger"+strconv.Itoa(i)+"@example.com", "wrong password 1"); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: status %d", i, st)
		}
	}
	if st := post("127.0.0.4", forged[0], "forge-co@example.com", "password-forge-co-1"); st != http.StatusTooManyRequests {
		t.Fatalf("the forger's eleventh attempt: status %d, want 429", st)
	}
	// The address it named was not charged.
	if st := post("127.0.0.9", "", "forge-co@example.com", "password-forge-co-1"); st != http.StatusCreated {
		t.Fatalf("the named address signs in: status %d", st)
	}
}
