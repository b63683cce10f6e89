package controlplane_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane"
)

// Every kind of bad input gets its own catalogue error, never a 500.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	a := e.signup("badinput")
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(a.keyID+":"+a.secret))
	if _, err := a.key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: "exists"}); err != nil {
		t.Fatal(err)
	}
	json := "application/json"
	for _, tc := range []struct {
		name, method, path, auth, ctype, body string
		status                                int
		code                                  string
	}{
		{"malformed json", "POST", "/v1/topics", auth, json, `{"name":`, 400, "malformed_json"},
		{"not json", "POST", "/v1/topics", auth, json, `name=orders`, 400, "malformed_json"},
		{"empty body", "POST", "/v1/topics", auth, json, ``, 400, "malformed_json"},
		{"two objects", "POST", "/v1/topics", auth, json, `{"name":"a"}{"name":"b"}`, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/topics", auth, json, `{"name":"a","partitons":3}`, 400, "unknown_field"},
		{"wrong type", "POST", "/v1/topics", auth, json, `{"name":"a","partitions":"3"}`, 400, "invalid_request"},
		{"wrong content type", "POST", "/v1/topics", auth, "text/plain", `{"name":"a"}`, 400, "invalid_request"},
		{"oversized body", "POST", "/v1/topics", auth, json, `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "body_too_large"},
		{"empty topic name", "POST", "/v1/topics", auth, json, `{"name":""}`, 400, "invalid_name"},
		{"dot dot topic", "POST", "/v1/topics", auth, json, `{"name":".."}`, 400, "invalid_name"},
		{"space in topic", "POST", "/v1/topics", auth, json, `{"name":"a b"}`, 400, "invalid_name"},
		{"reserved topic", "POST", "/v1/topics", auth, json, `{"name":"__consumer_offsets"}`, 400, "invalid_name"},
		{"long topic", "POST", "/v1/topics", auth, json, `{"name":"` + strings.Repeat("a", 250) + `"}`, 400, "invalid_name"},
		{"negative partitions", "POST", "/v1/topics", auth, json, `{"name":"a","partitions":-1}`, 400, "invalid_partitions"},
		{"zero partitions", "POST", "/v1/topics", auth, json, `{"name":"a","partitions":0}`, 400, "invalid_partitions"},
		{"unknown cleanup policy", "POST", "/v1/topics", auth, json, `{"name":"a","config":{"cleanup.policy":"shred"}}`, 400, "invalid_config"},
		{"unknown config", "POST", "/v1/topics", auth, json, `{"name":"a","config":{"flush.ms":"1"}}`, 400, "invalid_config"},
		{"bad retention", "POST", "/v1/topics", auth, json, `{"name":"a","config":{"retention.ms":"soon"}}`, 400, "invalid_config"},
		{"duplicate topic", "POST", "/v1/topics", auth, json, `{"name":"exists"}`, 409, "topic_already_exists"},
		// A taken tenant name or email is answered as any signup is (202),
		// and told by mail (TestSignupAnswersAlike).
		{"unknown signup token", "POST", "/v1/signup/confirm", "", json, `{"token":"nope"}`, 404, "not_found"},
		{"signup token missing", "POST", "/v1/signup/confirm", "", json, `{}`, 400, "invalid_request"},
		{"invalid tenant name", "POST", "/v1/signup", "", json, `{"tenant_name":"Bad Name","email":"x@y.test","password":"long enough 1"}`, 400, "invalid_name"},
		{"invalid email", "POST", "/v1/signup", "", json, `{"tenant_name":"okname","email":"not-an-email","password":"long enough 1"}`, 400, "invalid_request"},
		{"weak password", "POST", "/v1/signup", "", json, `{"tenant_name":"okname","email":"x@y.test","password":"short"}`, 400, "invalid_request"},
		{"dedicated plan", "POST", "/v1/signup", "", json, `{"tenant_name":"okname","email":"x@y.test","password":"long enough 1","plan":"dedicated"}`, 400, "invalid_request"},
		{"no credentials", "GET", "/v1/topics", "", "", "", 401, "unauthenticated"},
		{"unknown scheme", "GET", "/v1/topics", "Token abc", "", "", 401, "unauthenticated"},
		{"bad basic", "GET", "/v1/topics", "Basic !!!", "", "", 401, "unauthenticated"},
		{"bad session", "GET", "/v1/topics", "Bearer nope", "", "", 401, "unauthenticated"},
		{"unknown key", "GET", "/v1/topics", "Basic " + base64.StdEncoding.EncodeToString([]byte("SLKAAAAAAAAAAAAAAAA:x")), "", "", 401, "unauthenticated"},
		{"bad limit", "GET", "/v1/topics?limit=0", auth, "", "", 400, "invalid_request"},
		{"bad page token", "GET", "/v1/topics?page_token=%25%25", auth, "", "", 400, "invalid_page_token"},
		{"unknown route", "GET", "/v1/nothing-here", auth, "", "", 404, "not_found"},
		{"wrong method", "PUT", "/v1/topics", auth, json, `{}`, 405, "method_not_allowed"},
		{"wrong method on an item", "POST", "/v1/topics/orders", auth, json, `{}`, 405, "method_not_allowed"},
		{"no such route", "GET", "/v1/nope", auth, "", "", 404, "not_found"},
		{"bad acl", "POST", "/v1/acls", auth, json, `{"principal":"*","resource_type":"table","resource_name":"x","operation":"read"}`, 400, "invalid_request"},
		{"bad key role", "POST", "/v1/api-keys", auth, json, `{"role":"root"}`, 400, "invalid_request"},
		{"past expiry", "POST", "/v1/api-keys", auth, json, `{"expires_at":"2001-01-01T00:00:00Z"}`, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ae, _ := e.raw(tc.method, tc.path, tc.auth, tc.ctype, tc.body)
			if st != tc.status || ae.Code != tc.code {
				t.Fatalf("got %d %+v, want %d %s", st, ae, tc.status, tc.code)
			}
		})
	}
}

// Expired keys and sessions get 401 with their own codes.
func TestExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("expiry")
	exp := e.now.Now().Add(time.Hour)
	k := e.createKey(a.owner, api.CreateAPIKeyRequest{ExpiresAt: &exp})
	kc := e.anon.With(client.WithAPIKey(k.ID, k.Secret))
	if _, err := kc.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	e.now.Advance(2 * time.Hour)
	_, err := kc.Topics(ctx)
	wantCode(t, err, "key_expired")
	got, err := a.owner.APIKey(ctx, k.ID)
	if err != nil || got.Status != "expired" {
		t.Fatalf("expired key listed as %+v %v", got, err)
	}
	e.now.Advance(13 * time.Hour)
	_, err = a.owner.Topics(ctx)
	wantCode(t, err, "session_expired")
}

// Sign-in attempts are rate limited per email and address, with Retry-After.
func TestLoginRateLimit(t *testing.T) {
	e := newEnv(t, func(c *controlplane.Config) { c.LoginBurst = 5 })
	e.signup("limited")
	body := `{"email":"limited@example.com","password":"wrong password 1"}`
	for i := 0; i < 5; i++ {
		if st, ae, _ := e.raw("POST", "/v1/sessions", "", "application/json", body); st != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d %+v", i, st, ae)
		}
	}
	st, ae, h := e.raw("POST", "/v1/sessions", "", "application/json", body)
	if st != http.StatusTooManyRequests || ae.Code != "rate_limited" || !ae.Retriable {
		t.Fatalf("attempt 6: %d %+v, want 429 rate_limited", st, ae)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After = %q", h.Get("Retry-After"))
	}
	// Even the right password waits now: the limit is on attempts.
	st, _, _ = e.raw("POST", "/v1/sessions", "", "application/json", `{"email":"limited@example.com","password":"password-limited-1"}`)
	if st != http.StatusTooManyRequests {
		t.Fatalf("right password while limited: %d", st)
	}
	e.now.Advance(time.Minute)
	st, ae, _ = e.raw("POST", "/v1/sessions", "", "application/json", `{"email":"limited@example.com","password":"password-limited-1"}`)
	if st != http.StatusCreated {
		t.Fatalf("after waiting: %d %+v", st, ae)
	}
}

// Roles bound what members and keys may do within their own tenant.
func TestRoles(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("roles")
	if _, err := e.addMember(ctx, a.owner, api.AddMemberRequest{Email: "viewer@roles.test", Role: "viewer", Password: "viewer password 1"}); err != nil {
		t.Fatal(err)
	}
	s, err := e.anon.Login(ctx, api.SessionRequest{Email: "viewer@roles.test", Password: "viewer password 1"})
	if err != nil {
		t.Fatal(err)
	}
	viewer := e.anon.With(client.WithSession(s.Token))
	if _, err := viewer.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = viewer.CreateTopic(ctx, api.CreateTopicRequest{Name: "nope"})
	wantCode(t, err, "permission_denied")
	_, err = e.addMember(ctx, viewer, api.AddMemberRequest{Email: "x@roles.test", Role: "viewer", Password: "viewer password 1"})
	wantCode(t, err, "permission_denied")
	// The last owner cannot be removed or demoted.
	err = a.owner.RemoveMember(ctx, a.User.ID)
	wantCode(t, err, "invalid_request")
	// An admin cannot grant owner.
	adm, err := e.addMember(ctx, a.owner, api.AddMemberRequest{Email: "admin@roles.test", Role: "admin", Password: "admin password 1"})
	if err != nil {
		t.Fatal(err)
	}
	s, err = e.anon.Login(ctx, api.SessionRequest{Email: "admin@roles.test", Password: "admin password 1"})
	if err != nil {
		t.Fatal(err)
	}
	admin := e.anon.With(client.WithSession(s.Token))
	_, err = admin.UpdateMember(ctx, adm.UserID, api.UpdateMemberRequest{Role: "owner"})
	wantCode(t, err, "permission_denied")
	_, err = admin.UpdateMember(ctx, a.User.ID, api.UpdateMemberRequest{Role: "viewer"})
	wantCode(t, err, "permission_denied")
	// Suspension stops changes but not reads.
	st := "suspended"
	if _, err := e.op.AdminUpdateTenant(ctx, a.Tenant.ID, api.UpdateTenantRequest{Status: &st}); err != nil {
		t.Fatal(err)
	}
	_, err = a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "x"})
	wantCode(t, err, "tenant_suspended")
	if _, err := a.key.Topics(ctx); err != nil {
		t.Fatal(err)
	}
}
