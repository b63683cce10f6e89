package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
)

// An operator signs in with the operator key tenantd dev prints and lands on
// the operator pages; a wrong key or a tenant's key is refused next to the
// operator form.
func TestOperatorKeySignIn(t *testing.T) {
	e := newEnv(t)
	dev := e.browser()
	dev.signup("ops-view-co")
	k, err := dev.api().CreateAPIKey(context.Background(), api.CreateAPIKeyRequest{Description: "tenant key", Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, key, code string
		status          int
	}{
		{"empty", "", "invalid_request", http.StatusUnprocessableEntity},
		{"wrong secret", e.opKey + "x", "unauthenticated", http.StatusUnauthorized},
		{"tenant key", k.ID + ":" + k.Secret, "permission_denied", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := e.browser()
			b.get("/login?as=operator")
			resp, body := b.post("/login/operator", url.Values{"api_key": {tc.key}})
			wantStatus(t, resp, body, tc.status)
			wantContains(t, body, `id="operator-login-error"`, tc.code, `<details id="operator-signin" open>`)
			if b.sessionToken() != "" {
				t.Fatal("a refused key got a session")
			}
		})
	}

	op := e.browser()
	resp, body := op.get("/login")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `action="/login/operator"`)
	resp, body = op.post("/login/operator", url.Values{"api_key": {" " + e.opKey + " "}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/admin/tenants" {
		t.Fatalf("operator sign-in redirects to %q", loc)
	}
	resp, body = op.get("/admin/tenants")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "ops-view-co", "operator key")
	// The operator's session has no tenant pages.
	resp, body = op.get("/")
	wantStatus(t, resp, body, http.StatusSeeOther)
	// Signing out ends the session.
	resp, body = op.post("/logout", url.Values{})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, _ = op.get("/admin/tenants")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after sign-out, the operator pages answer %d", resp.StatusCode)
	}

	// next is honoured, within the console.
	op2 := e.browser()
	op2.get("/login?next=%2Fadmin%2Fcells")
	resp, body = op2.post("/login/operator", url.Values{"api_key": {e.opKey}, "next": {"/admin/cells"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/admin/cells" {
		t.Fatalf("operator sign-in with next redirects to %q", loc)
	}
}
