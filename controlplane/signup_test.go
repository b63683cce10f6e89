package controlplane_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// TestSignupAnswersAlike: a signup with a new address, a registered one,
// and a taken tenant name get the same status and byte-for-byte the same
// body; only the mail to the address differs (a token, the news that the
// address has an account, the news that the name is taken), and only the
// new address's signup creates anything, once its token comes back.
func TestSignupAnswersAlike(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.signup("taken") // taken@example.com owns tenant "taken"

	post := func(body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(e.url+"/v1/signup", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := e.db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	users, tenants := count(`SELECT count(*) FROM users`), count(`SELECT count(*) FROM tenants`)

	cases := []struct {
		name, body, to string
		mailHas        []string
		token          bool
	}{
		{"new address, free name", `{"tenant_name":"fresh","email":"new@example.com","password":"password-fresh-1"}`,
			"new@example.com", []string{"confirm", `"fresh"`, "/v1/signup/confirm"}, true},
		{"registered address", `{"tenant_name":"another","email":"Taken@Example.com","password":"password-guess-1"}`,
			"taken@example.com", []string{"already has an account", "Nothing was created", "POST /v1/tenants"}, false},
		{"taken tenant name", `{"tenant_name":"taken","email":"other@example.com","password":"password-other-1"}`,
			"other@example.com", []string{"tenant name", `"taken"`, "another name"}, false},
	}
	var first []byte
	var token string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.body)
			if status != http.StatusAccepted {
				t.Fatalf("status %d %s, want 202", status, body)
			}
			if first == nil {
				first = body
			} else if !bytes.Equal(body, first) {
				t.Fatalf("answer %s differs from the new address's %s", body, first)
			}
			text, err := mail.Last(e.mail, tc.to)
			if err != nil || text == "" {
				t.Fatalf("no mail to %s: %v", tc.to, err)
			}
			for _, want := range tc.mailHas {
				if !strings.Contains(text, want) {
					t.Errorf("the mail to %s lacks %q:\n%s", tc.to, want, text)
				}
			}
			if got := mail.Token(text); (got != "") != tc.token {
				t.Fatalf("mail token %q, want one: %v\n%s", got, tc.token, text)
			} else if got != "" {
				token = got
			}
		})
	}
	if n := count(`SELECT count(*) FROM signup_requests`); n != 1 {
		t.Fatalf("%d signup requests stored, want the new address's only", n)
	}
	if u, tn := count(`SELECT count(*) FROM users`), count(`SELECT count(*) FROM tenants`); u != users || tn != tenants {
		t.Fatalf("before any confirmation: %d users, %d tenants; want %d, %d", u, tn, users, tenants)
	}

	// The token creates the tenant and signs its owner in, once.
	res, err := e.anon.ConfirmSignup(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tenant.Name != "fresh" || res.User.Email != "new@example.com" || res.Session.Role != "owner" {
		t.Fatalf("confirmed signup %+v", res)
	}
	if me, err := e.anon.With(client.WithSession(res.Session.Token)).Me(ctx); err != nil || me.TenantName != "fresh" {
		t.Fatalf("the confirmed owner's session: %+v %v", me, err)
	}
	if _, err := e.anon.Login(ctx, api.SessionRequest{Email: "new@example.com", Password: "password-fresh-1"}); err != nil {
		t.Fatalf("sign-in with the signup's password: %v", err)
	}
	_, err = e.anon.ConfirmSignup(ctx, token)
	wantCode(t, err, "not_found")
	_, err = e.anon.ConfirmSignup(ctx, "")
	wantCode(t, err, "invalid_request")

	// A bad request is still told what is wrong: that reveals nothing.
	if status, body := post(`{"tenant_name":"x y","email":"z@example.com","password":"password-zz-1"}`); status != http.StatusBadRequest {
		t.Fatalf("bad tenant name: %d %s", status, body)
	}
}

// TestSignupTokenExpires: a token past SignupTTL creates nothing.
func TestSignupTokenExpires(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.anon.Signup(ctx, api.SignupRequest{TenantName: "late", Email: "late@example.com", Password: "password-late-1"}); err != nil {
		t.Fatal(err)
	}
	text, err := mail.Last(e.mail, "late@example.com")
	if err != nil {
		t.Fatal(err)
	}
	e.now.Advance(24*time.Hour + time.Second)
	_, err = e.anon.ConfirmSignup(ctx, mail.Token(text))
	wantCode(t, err, "not_found")
	var n int
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE name = 'late'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("an expired token made %d tenants (%v)", n, err)
	}
}
