package controlplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane"
)

// A user with an account creates a second tenant, owns it, signs in to
// either one, and the two tenants see nothing of each other.
func TestCreateTenantAsExistingUser(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("acme")
	const email, password = "acme@example.com", "password-acme-1"

	// Signup with the same email: the mail says how to get another tenant.
	_, err := e.signUp(ctx, api.SignupRequest{TenantName: "acme-staging", Email: email, Password: password})
	if err == nil || !strings.Contains(err.Error(), "POST /v1/tenants") {
		t.Fatalf("signup with a taken email: %v; want its mail to point at POST /v1/tenants", err)
	}

	res, err := a.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "acme-staging", Plan: "standard"})
	if err != nil {
		t.Fatalf("create a second tenant: %v", err)
	}
	if res.Tenant.Name != "acme-staging" || res.Tenant.Plan != "standard" || res.Tenant.Status != "active" ||
		res.Tenant.HomeCellID == "" || res.Tenant.ID == a.Tenant.ID {
		t.Fatalf("new tenant %+v", res.Tenant)
	}
	if res.Session.TenantID != res.Tenant.ID || res.Session.Role != "owner" || res.Session.Token == "" {
		t.Fatalf("new session %+v", res.Session)
	}
	staging := e.anon.With(client.WithSession(res.Session.Token))
	me, err := staging.Me(ctx)
	if err != nil || me.UserID != a.User.ID || me.TenantID != res.Tenant.ID || me.TenantName != "acme-staging" || me.Role != "owner" {
		t.Fatalf("me on the new session: %+v %v", me, err)
	}
	var q api.Quotas
	if err := staging.Do(ctx, "GET", "/v1/quotas", nil, &q); err != nil || q.MaxTopics == 0 {
		t.Fatalf("quotas of the new tenant: %+v %v", q, err)
	}
	// The first session still works, on the first tenant.
	if me, err := a.owner.Me(ctx); err != nil || me.TenantID != a.Tenant.ID {
		t.Fatalf("first session after the create: %+v %v", me, err)
	}

	// Either session lists both tenants, the choices for signing in.
	for _, cl := range []*client.Client{a.owner, staging} {
		ts, err := cl.Tenants(ctx)
		if err != nil || len(ts) != 2 || ts[0].Name != "acme" || ts[1].Name != "acme-staging" ||
			ts[0].Role != "owner" || ts[1].Role != "owner" || ts[1].ID != res.Tenant.ID || ts[1].Plan != "standard" {
			t.Fatalf("tenants: %+v %v", ts, err)
		}
	}

	// Signing in now names the tenant, by name or id.
	_, err = e.anon.Login(ctx, api.SessionRequest{Email: email, Password: password})
	wantCode(t, err, "invalid_request")
	for _, tc := range []struct{ name, tenant, want string }{
		{"first by name", "acme", a.Tenant.ID},
		{"second by name", "acme-staging", res.Tenant.ID},
		{"second by id", res.Tenant.ID, res.Tenant.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := e.anon.Login(ctx, api.SessionRequest{Email: email, Password: password, Tenant: tc.tenant})
			if err != nil || s.TenantID != tc.want || s.Role != "owner" {
				t.Fatalf("sign in to %s: %+v %v", tc.tenant, s, err)
			}
			if tn, err := e.anon.With(client.WithSession(s.Token)).Tenant(ctx); err != nil || tn.ID != tc.want {
				t.Fatalf("tenant of the session: %+v %v", tn, err)
			}
		})
	}

	// The tenants are isolated from each other like any two tenants.
	if _, err := staging.CreateTopic(ctx, api.CreateTopicRequest{Name: "staging-only"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.key.Topic(ctx, "staging-only"); !client.IsCode(err, "topic_not_found") {
		t.Fatalf("the first tenant's key reads the second's topic: %v", err)
	}
	if tps, err := a.owner.Topics(ctx); err != nil || len(tps) != 0 {
		t.Fatalf("the first tenant lists %+v %v", tps, err)
	}
	if ks, err := staging.APIKeys(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("the second tenant lists the first's keys: %+v %v", ks, err)
	}
	if ms, err := staging.Members(ctx); err != nil || len(ms) != 1 || ms[0].UserID != a.User.ID || ms[0].Role != "owner" {
		t.Fatalf("members of the second tenant: %+v %v", ms, err)
	}
}

// Tenant creation has signup's name and plan rules, and only a user's
// session may ask for it.
func TestCreateTenantRefusals(t *testing.T) {
	// Refused requests spend the per-user rate like any other; these are many.
	e := newEnv(t, func(c *controlplane.Config) { c.TenantCreateBurst = 100 })
	ctx := context.Background()
	a, b := e.signup("tenant-a"), e.signup("tenant-b")

	opUser := "ops@sluice.test"
	if _, err := e.db.Exec(ctx, `INSERT INTO users (id, email, password_hash, is_operator) VALUES ($1, $2, $3, true)`,
		credential.NewID("us_"), opUser, credential.HashPassword("operator password 1")); err != nil {
		t.Fatal(err)
	}
	opUserSession, err := e.anon.Login(ctx, api.SessionRequest{Email: opUser, Password: "operator password 1"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, opKeySession := e.operatorKeySession("console operator")

	callers := []struct {
		name string
		c    *client.Client
		code string
	}{
		{"tenant api key", a.key, "permission_denied"},
		{"operator api key", e.op, "permission_denied"},
		{"operator key session", e.anon.With(client.WithSession(opKeySession.Token)), "permission_denied"},
		{"operator user session", e.anon.With(client.WithSession(opUserSession.Token)), "permission_denied"},
		{"no credentials", e.anon, "unauthenticated"},
	}
	for _, tc := range callers {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.CreateTenant(ctx, api.CreateTenantRequest{Name: "not-made"})
			wantCode(t, err, tc.code)
			_, err = tc.c.Tenants(ctx)
			wantCode(t, err, tc.code)
		})
	}
	var n int
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE name = 'not-made'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a refused caller made %d tenants (%v)", n, err)
	}

	requests := []struct {
		name, body, code string
	}{
		{"taken by another user", `{"name":"tenant-b"}`, "already_exists"},
		{"taken by the caller", `{"name":"tenant-a"}`, "already_exists"},
		{"bad name", `{"name":"Tenant_A"}`, "invalid_name"},
		{"no name", `{}`, "invalid_name"},
		{"dedicated plan", `{"name":"tenant-a-2","plan":"dedicated"}`, "invalid_request"},
		{"unknown plan", `{"name":"tenant-a-2","plan":"gold"}`, "invalid_request"},
		{"unknown field", `{"name":"tenant-a-2","tenant_name":"x"}`, "unknown_field"},
	}
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			st, ae, _ := e.raw("POST", "/v1/tenants", "Bearer "+a.Session.Token, "application/json", tc.body)
			if ae.Code != tc.code {
				t.Fatalf("%s: %d %+v, want %s", tc.body, st, ae, tc.code)
			}
			if strings.Contains(ae.Message, b.Tenant.ID) {
				t.Fatalf("the refusal names another tenant: %+v", ae)
			}
		})
	}

	// A suspended tenant's session creates none.
	suspended := "suspended"
	if _, err := e.op.AdminUpdateTenant(ctx, b.Tenant.ID, api.UpdateTenantRequest{Status: &suspended}); err != nil {
		t.Fatal(err)
	}
	_, err = b.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "tenant-b-2"})
	wantCode(t, err, "tenant_suspended")
}

// Tenant creation is limited per user, and by the tenants a user owns.
func TestCreateTenantLimits(t *testing.T) {
	e := newEnv(t, func(c *controlplane.Config) {
		c.TenantCreateRate, c.TenantCreateBurst, c.MaxOwnedTenants = time.Hour, 2, 3
	})
	ctx := context.Background()
	a, b := e.signup("limits-a"), e.signup("limits-b")

	for _, name := range []string{"limits-a-2", "limits-a-3"} {
		if _, err := a.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: name}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	// The burst is spent: the third is refused with when to retry.
	st, ae, h := e.raw("POST", "/v1/tenants", "Bearer "+a.Session.Token, "application/json", `{"name":"limits-a-4"}`)
	if st != 429 || ae.Code != "rate_limited" || h.Get("Retry-After") == "" {
		t.Fatalf("third create: %d %+v Retry-After %q", st, ae, h.Get("Retry-After"))
	}
	// Per user: another user is not limited by it.
	if _, err := b.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "limits-b-2"}); err != nil {
		t.Fatalf("another user's create: %v", err)
	}

	// With the rate recovered, the cap of owned tenants (3) holds.
	e.now.Advance(2 * time.Hour)
	_, err := a.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "limits-a-4"})
	wantCode(t, err, "quota_exceeded")
	var owned int
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE user_id = $1 AND role = 'owner'`, a.User.ID).Scan(&owned); err != nil || owned != 3 {
		t.Fatalf("the user owns %d tenants (%v), want 3", owned, err)
	}
	// Giving up ownership of one makes room.
	if _, err := e.addMember(ctx, a.owner, api.AddMemberRequest{Email: "second-owner@limits-a.test", Role: "owner", Password: "owner password 1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.owner.UpdateMember(ctx, a.User.ID, api.UpdateMemberRequest{Role: "viewer"}); err != nil {
		t.Fatalf("step down to viewer: %v", err)
	}
	if _, err := a.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "limits-a-4"}); err != nil {
		t.Fatalf("create after giving up ownership of one: %v", err)
	}
}
