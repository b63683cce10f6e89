package controlplane_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// TestTenantIsolation walks every registered route as tenant B against
// tenant A's resources: B never reads, changes or detects them. A route added
// without a case here fails the test.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.signup("tenant-a"), e.signup("tenant-b")

	// Tenant A's resources.
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 2, Config: map[string]string{"retention.ms": "86400000"}}); err != nil {
		t.Fatal(err)
	}
	acl, err := a.key.CreateACL(ctx, api.CreateACLRequest{Principal: a.keyID, ResourceType: "topic", ResourceName: "orders", Operation: "read"})
	if err != nil {
		t.Fatal(err)
	}
	member, err := e.addMember(ctx, a.owner, api.AddMemberRequest{Email: "dev@tenant-a.test", Role: "developer", Password: "dev password 1"})
	if err != nil {
		t.Fatal(err)
	}
	// A's consumer group "orders", as its coordinator reports it.
	reportGroups(t, e.cellClient(), "cell-1-b1", wire.GroupLag{TenantID: a.Tenant.ID, Group: "orders",
		TopicID: topicID(t, e, a.Tenant.ID, "orders"), Partition: 1, CommittedOffset: 7, Measured: true, HighWatermark: 9, LagRecords: 2})
	if _, err := a.key.Group(ctx, "orders"); err != nil {
		t.Fatalf("A reads its group: %v", err)
	}
	bAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(b.keyID+":"+b.secret))
	missingKey := "SLKAAAAAAAAAAAAAAAA"

	// same asserts that B's request about A's resource is answered exactly
	// like the same request about a resource that does not exist.
	same := func(method, pathA, pathMissing, body string) {
		t.Helper()
		sa, ea, _ := e.raw(method, pathA, bAuth, "application/json", body)
		sm, em, _ := e.raw(method, pathMissing, bAuth, "application/json", body)
		ea.Message = strings.ReplaceAll(ea.Message, "orders", "X")
		em.Message = strings.ReplaceAll(em.Message, "nope", "X")
		if sa != sm || ea != em || sa != http.StatusNotFound {
			t.Fatalf("%s %s: B got %d %+v for A's resource and %d %+v for a missing one; want identical 404s", method, pathA, sa, ea, sm, em)
		}
	}
	// listed asserts that B's listing holds nothing of A's.
	listed := func(path string, forbidden ...string) {
		t.Helper()
		var page api.Page[map[string]any]
		if err := b.key.Do(ctx, http.MethodGet, path, nil, &page); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		for _, item := range page.Items {
			for _, v := range item {
				for _, f := range forbidden {
					if s, ok := v.(string); ok && s == f {
						t.Fatalf("GET %s as B shows A's %q", path, f)
					}
				}
			}
		}
	}
	ownTenant := func(path string) {
		t.Helper()
		var out map[string]any
		if err := b.key.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if tid, ok := out["tenant_id"]; ok && tid != b.Tenant.ID {
			t.Fatalf("GET %s as B answers tenant %v", path, tid)
		}
		if id, ok := out["id"]; ok && id != b.Tenant.ID {
			t.Fatalf("GET %s as B answers tenant %v", path, id)
		}
	}
	operatorOnly := func(method, path string) {
		t.Helper()
		st, ae, _ := e.raw(method, path, bAuth, "application/json", "{}")
		if st != http.StatusForbidden || ae.Code != "permission_denied" {
			t.Fatalf("%s %s as tenant B: %d %+v, want 403 permission_denied", method, path, st, ae)
		}
	}

	cases := map[string]func(){
		"GET /v1/openapi.json": func() {
			if st, _, _ := e.raw("GET", "/v1/openapi.json", "", "", ""); st != 200 {
				t.Fatalf("openapi: %d", st)
			}
		},
		"POST /v1/signup": func() {
			// A taken name is answered as any signup (the mail says it is
			// taken), and the mail names nothing of A's but the name asked for.
			st, ae, _ := e.raw("POST", "/v1/signup", "", "application/json",
				`{"tenant_name":"tenant-a","email":"other@x.test","password":"password 123"}`)
			if st != http.StatusAccepted {
				t.Fatalf("signup with A's name: %d %+v", st, ae)
			}
			text, err := mail.Last(e.mail, "other@x.test")
			if err != nil || !strings.Contains(text, "taken") || strings.Contains(text, a.Tenant.ID) ||
				strings.Contains(text, "tenant-a@example.com") || mail.Token(text) != "" {
				t.Fatalf("the mail for a signup with A's name: %v\n%s", err, text)
			}
		},
		"POST /v1/signup/confirm": func() {
			// Another's token is as unknown as a made-up one.
			st, ae, _ := e.raw("POST", "/v1/signup/confirm", "", "application/json", `{"token":"`+a.Session.Token+`"}`)
			if st != http.StatusNotFound || strings.Contains(ae.Message, a.Tenant.ID) {
				t.Fatalf("confirm with A's session token: %d %+v", st, ae)
			}
		},
		"POST /v1/sessions": func() {
			st, _, _ := e.raw("POST", "/v1/sessions", "", "application/json",
				`{"email":"tenant-a@example.com","password":"`+"password-tenant-b-1"+`"}`)
			if st != http.StatusUnauthorized {
				t.Fatalf("B's password on A's email: %d", st)
			}
			// Only operator keys sign in with a key; B's key gets no session.
			st, ae, _ := e.raw("POST", "/v1/sessions", "", "application/json", `{"api_key":"`+b.keyID+":"+b.secret+`"}`)
			if st != http.StatusForbidden || ae.Code != "permission_denied" {
				t.Fatalf("sign-in with B's tenant key: %d %+v", st, ae)
			}
			st, _, _ = e.raw("POST", "/v1/sessions", "", "application/json", `{"api_key":"`+a.keyID+":"+b.secret+`"}`)
			if st != http.StatusUnauthorized {
				t.Fatalf("sign-in with A's key id and B's secret: %d", st)
			}
		},
		"DELETE /v1/sessions/current": func() {
			s, err := e.anon.Login(ctx, api.SessionRequest{Email: "tenant-b@example.com", Password: "password-tenant-b-1"})
			if err != nil {
				t.Fatal(err)
			}
			if st, _, _ := e.raw("DELETE", "/v1/sessions/current", "Bearer "+s.Token, "", ""); st != http.StatusNoContent {
				t.Fatalf("logout: %d", st)
			}
			if _, err := a.owner.Me(ctx); err != nil {
				t.Fatalf("B's logout ended A's session: %v", err)
			}
		},
		"GET /v1/me":     func() { ownTenant("/v1/me") },
		"GET /v1/tenant": func() { ownTenant("/v1/tenant") },
		"GET /v1/tenants": func() {
			// B's user sees B's tenants only; a key speaks for no user.
			ts, err := b.owner.Tenants(ctx)
			if err != nil || len(ts) != 1 || ts[0].ID != b.Tenant.ID {
				t.Fatalf("B's tenants: %+v %v", ts, err)
			}
			for _, tn := range ts {
				if tn.ID == a.Tenant.ID || tn.Name == a.Tenant.Name {
					t.Fatalf("B's tenants list A's: %+v", ts)
				}
			}
			if st, ae, _ := e.raw("GET", "/v1/tenants", bAuth, "", ""); st != http.StatusForbidden || ae.Code != "permission_denied" {
				t.Fatalf("B's key lists tenants: %d %+v", st, ae)
			}
		},
		"POST /v1/tenants": func() {
			// A key or an operator cannot create one; a user can, and the
			// new tenant is as isolated from A as B is. (A third tenant's
			// user creates it, so B's sign-in keeps one tenant to pick.)
			id, secret, err := controlplane.CreateOperatorKey(ctx, e.db, "isolation operator")
			if err != nil {
				t.Fatal(err)
			}
			opSession, err := e.anon.Login(ctx, api.SessionRequest{APIKey: id + ":" + secret})
			if err != nil {
				t.Fatal(err)
			}
			for _, auth := range []string{bAuth, "Bearer " + opSession.Token} {
				if st, ae, _ := e.raw("POST", "/v1/tenants", auth, "application/json", `{"name":"tenant-x"}`); st != http.StatusForbidden || ae.Code != "permission_denied" {
					t.Fatalf("create a tenant as %.10s…: %d %+v", auth, st, ae)
				}
			}
			st, ae, _ := e.raw("POST", "/v1/tenants", "Bearer "+b.Session.Token, "application/json", `{"name":"tenant-a"}`)
			if st != http.StatusConflict || ae.Code != "already_exists" || strings.Contains(ae.Message, a.Tenant.ID) {
				t.Fatalf("B's user takes A's name: %d %+v", st, ae)
			}
			c := e.signup("tenant-c")
			res, err := c.owner.CreateTenant(ctx, api.CreateTenantRequest{Name: "tenant-c-two"})
			if err != nil {
				t.Fatal(err)
			}
			c2 := e.anon.With(client.WithSession(res.Session.Token))
			if _, err := c2.Topic(ctx, "orders"); !client.IsCode(err, "topic_not_found") {
				t.Fatalf("C's new tenant reads A's topic: %v", err)
			}
			if _, err := c2.ACL(ctx, acl.ID); !client.IsCode(err, "not_found") {
				t.Fatalf("C's new tenant reads A's ACL: %v", err)
			}
			if ms, err := c2.Members(ctx); err != nil || len(ms) != 1 || ms[0].UserID != c.User.ID {
				t.Fatalf("members of C's new tenant: %+v %v", ms, err)
			}
			if _, err := c2.Group(ctx, "orders"); !client.IsCode(err, "group_not_found") {
				t.Fatalf("C's new tenant reads A's group: %v", err)
			}
		},
		"GET /v1/cluster": func() { ownTenant("/v1/cluster") },
		"GET /v1/quotas":  func() { ownTenant("/v1/quotas") },

		"GET /v1/api-keys": func() { listed("/v1/api-keys", a.keyID) },
		"POST /v1/api-keys": func() {
			k := e.createKey(b.key, api.CreateAPIKeyRequest{Description: "b"})
			if strings.HasPrefix(k.ID, a.keyID) {
				t.Fatal("impossible key collision")
			}
		},
		"GET /v1/api-keys/:id":    func() { same("GET", "/v1/api-keys/"+a.keyID, "/v1/api-keys/"+missingKey, "") },
		"DELETE /v1/api-keys/:id": func() { same("DELETE", "/v1/api-keys/"+a.keyID, "/v1/api-keys/"+missingKey, "") },

		"GET /v1/topics": func() { listed("/v1/topics", "orders") },
		"POST /v1/topics": func() {
			// B may use the same name: namespaces are per tenant, so a
			// create reveals nothing about A.
			tp, err := b.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders"})
			if err != nil || tp.Partitions != 1 {
				t.Fatalf("B creates its own orders: %+v %v", tp, err)
			}
			if err := b.key.DeleteTopic(ctx, "orders"); err != nil {
				t.Fatal(err)
			}
		},
		"GET /v1/topics/:name":    func() { same("GET", "/v1/topics/orders", "/v1/topics/nope", "") },
		"PATCH /v1/topics/:name":  func() { same("PATCH", "/v1/topics/orders", "/v1/topics/nope", `{"partitions":5}`) },
		"DELETE /v1/topics/:name": func() { same("DELETE", "/v1/topics/orders", "/v1/topics/nope", "") },

		"GET /v1/acls": func() { listed("/v1/acls", acl.ID, a.keyID) },
		"POST /v1/acls": func() {
			body := `{"principal":"%s","resource_type":"topic","resource_name":"orders","operation":"read"}`
			st, ea, _ := e.raw("POST", "/v1/acls", bAuth, "application/json", strings.Replace(body, "%s", a.keyID, 1))
			sm, em, _ := e.raw("POST", "/v1/acls", bAuth, "application/json", strings.Replace(body, "%s", missingKey, 1))
			if st != http.StatusNotFound || st != sm || ea != em {
				t.Fatalf("ACL naming A's key: %d %+v vs missing key %d %+v", st, ea, sm, em)
			}
		},
		"GET /v1/acls/:id":    func() { same("GET", "/v1/acls/"+acl.ID, "/v1/acls/acl_nope", "") },
		"DELETE /v1/acls/:id": func() { same("DELETE", "/v1/acls/"+acl.ID, "/v1/acls/acl_nope", "") },

		"GET /v1/groups":        func() { listed("/v1/groups", "orders") },
		"GET /v1/groups/:group": func() { same("GET", "/v1/groups/orders", "/v1/groups/nope", "") },

		"GET /v1/members": func() { listed("/v1/members", member.UserID, a.User.ID, "dev@tenant-a.test") },
		"POST /v1/members": func() {
			m, err := e.addMember(ctx, b.owner, api.AddMemberRequest{Email: "viewer@tenant-b.test", Role: "viewer", Password: "viewer password 1"})
			if err != nil || m.Role != "viewer" {
				t.Fatalf("B adds a member: %+v %v", m, err)
			}
		},
		"POST /v1/invitations/accept": func() {
			// B invites; A's member cannot take the invitation with anything
			// but its mailed token, and accepting it adds to B only.
			if _, err := b.owner.AddMember(ctx, api.AddMemberRequest{Email: "dev@tenant-a.test", Role: "viewer", Password: "viewer password 1"}); err != nil {
				t.Fatal(err)
			}
			st, ae, _ := e.raw("POST", "/v1/invitations/accept", "", "application/json", `{"token":"`+a.Session.Token+`"}`)
			if st != http.StatusNotFound || strings.Contains(ae.Message, a.Tenant.ID) {
				t.Fatalf("accept with A's session token: %d %+v", st, ae)
			}
			text, _ := mail.Last(e.mail, "dev@tenant-a.test")
			if strings.Contains(text, a.Tenant.ID) || strings.Contains(text, "tenant-a\"") {
				t.Fatalf("B's invitation names A:\n%s", text)
			}
			m, err := e.anon.AcceptInvitation(ctx, mail.Token(text))
			if err != nil || m.Role != "viewer" {
				t.Fatalf("accept B's invitation: %+v %v", m, err)
			}
			if ms, _ := a.owner.Members(ctx); len(ms) != 2 {
				t.Fatalf("A's members after B's invitation: %+v", ms)
			}
			// The other cases run in any order and list B's members: A's
			// member, legitimately B's now, leaves again.
			if err := b.owner.RemoveMember(ctx, m.UserID); err != nil {
				t.Fatalf("B removes the member it invited: %v", err)
			}
		},
		"PATCH /v1/members/:user_id": func() {
			same("PATCH", "/v1/members/"+member.UserID, "/v1/members/us_nope", `{"role":"viewer"}`)
		},
		"DELETE /v1/members/:user_id": func() {
			same("DELETE", "/v1/members/"+member.UserID, "/v1/members/us_nope", "")
		},

		"GET /v1/admin/tenants":                 func() { operatorOnly("GET", "/v1/admin/tenants") },
		"GET /v1/admin/tenants/:id":             func() { operatorOnly("GET", "/v1/admin/tenants/"+a.Tenant.ID) },
		"PATCH /v1/admin/tenants/:id":           func() { operatorOnly("PATCH", "/v1/admin/tenants/"+a.Tenant.ID) },
		"GET /v1/admin/tenants/:id/quotas":      func() { operatorOnly("GET", "/v1/admin/tenants/"+a.Tenant.ID+"/quotas") },
		"PUT /v1/admin/tenants/:id/quotas":      func() { operatorOnly("PUT", "/v1/admin/tenants/"+a.Tenant.ID+"/quotas") },
		"GET /v1/admin/pools":                   func() { operatorOnly("GET", "/v1/admin/pools") },
		"POST /v1/admin/pools":                  func() { operatorOnly("POST", "/v1/admin/pools") },
		"GET /v1/admin/pools/:id":               func() { operatorOnly("GET", "/v1/admin/pools/shared-1") },
		"GET /v1/admin/cells":                   func() { operatorOnly("GET", "/v1/admin/cells") },
		"POST /v1/admin/cells":                  func() { operatorOnly("POST", "/v1/admin/cells") },
		"GET /v1/admin/cells/:id":               func() { operatorOnly("GET", "/v1/admin/cells/cell-1") },
		"POST /v1/admin/cells/:id/keys":         func() { operatorOnly("POST", "/v1/admin/cells/cell-1/keys") },
		"GET /v1/admin/brokers":                 func() { operatorOnly("GET", "/v1/admin/brokers") },
		"POST /v1/admin/brokers":                func() { operatorOnly("POST", "/v1/admin/brokers") },
		"GET /v1/admin/brokers/:id":             func() { operatorOnly("GET", "/v1/admin/brokers/cell-1-b1") },
		"PATCH /v1/admin/brokers/:id":           func() { operatorOnly("PATCH", "/v1/admin/brokers/cell-1-b1") },
		"DELETE /v1/admin/brokers/:id":          func() { operatorOnly("DELETE", "/v1/admin/brokers/cell-1-b1") },
		"GET /v1/admin/api-keys":                func() { operatorOnly("GET", "/v1/admin/api-keys") },
		"POST /v1/admin/api-keys":               func() { operatorOnly("POST", "/v1/admin/api-keys") },
		"DELETE /v1/admin/api-keys/:id":         func() { operatorOnly("DELETE", "/v1/admin/api-keys/"+a.keyID) },
		"GET /v1/admin/tenants/:id/throttle":    func() { operatorOnly("GET", "/v1/admin/tenants/"+a.Tenant.ID+"/throttle") },
		"PUT /v1/admin/tenants/:id/throttle":    func() { operatorOnly("PUT", "/v1/admin/tenants/"+a.Tenant.ID+"/throttle") },
		"DELETE /v1/admin/tenants/:id/throttle": func() { operatorOnly("DELETE", "/v1/admin/tenants/"+a.Tenant.ID+"/throttle") },
		"DELETE /v1/admin/tenants/:id/api-keys/:key": func() {
			operatorOnly("DELETE", "/v1/admin/tenants/"+a.Tenant.ID+"/api-keys/"+a.keyID)
		},
		"GET /v1/usage":                    func() { usageIsolated(t, e, a, b) },
		"GET /v1/billing":                  func() { billingIsolated(t, e, a, b) },
		"GET /v1/admin/usage":              func() { operatorOnly("GET", "/v1/admin/usage") },
		"GET /v1/admin/billing/reconcile":  func() { operatorOnly("GET", "/v1/admin/billing/reconcile") },
		"GET /v1/admin/moves":              func() { operatorOnly("GET", "/v1/admin/moves") },
		"POST /v1/admin/moves":             func() { operatorOnly("POST", "/v1/admin/moves") },
		"GET /v1/admin/moves/:id":          func() { operatorOnly("GET", "/v1/admin/moves/1") },
		"POST /v1/admin/moves/:id/cancel":  func() { operatorOnly("POST", "/v1/admin/moves/1/cancel") },
		"POST /v1/admin/brokers/:id/drain": func() { operatorOnly("POST", "/v1/admin/brokers/cell-1-b1/drain") },
		"POST /v1/admin/tenants/:id/move":  func() { operatorOnly("POST", "/v1/admin/tenants/"+a.Tenant.ID+"/move") },
		"GET /v1/admin/tenant-moves":       func() { operatorOnly("GET", "/v1/admin/tenant-moves") },
		"GET /v1/admin/tenant-moves/:id":   func() { operatorOnly("GET", "/v1/admin/tenant-moves/1") },
		"PATCH /v1/admin/tenant-moves/:id": func() { operatorOnly("PATCH", "/v1/admin/tenant-moves/1") },
		"POST /v1/admin/tenant-moves/:id/cancel": func() {
			operatorOnly("POST", "/v1/admin/tenant-moves/1/cancel")
		},
	}
	for _, r := range e.srv.Routes() {
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		name := r.Method + " " + r.Path
		run, ok := cases[name]
		if !ok {
			t.Errorf("route %s has no isolation case", name)
			continue
		}
		t.Run(name, func(t *testing.T) { run() })
		delete(cases, name)
	}
	for name := range cases {
		t.Errorf("isolation case %s matches no route", name)
	}

	// Everything of A's is untouched.
	tp, err := a.key.Topic(ctx, "orders")
	if err != nil || tp.Partitions != 2 || tp.Config["retention.ms"] != "86400000" {
		t.Fatalf("A's topic after B's attempts: %+v %v", tp, err)
	}
	k, err := a.owner.APIKey(ctx, a.keyID)
	if err != nil || k.Status != "active" {
		t.Fatalf("A's key after B's attempts: %+v %v", k, err)
	}
	if _, err := a.key.ACL(ctx, acl.ID); err != nil {
		t.Fatalf("A's ACL after B's attempts: %v", err)
	}
	if g, err := a.key.Group(ctx, "orders"); err != nil || g.LagRecords != 2 {
		t.Fatalf("A's group after B's attempts: %+v %v", g, err)
	}
	ms, err := a.owner.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("A's members after B's attempts: %+v %v", ms, err)
	}
	for _, m := range ms {
		if m.UserID == member.UserID && m.Role != "developer" {
			t.Fatalf("A's member changed to %s", m.Role)
		}
	}
}
