package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/client"
)

// TestTenantForms drives every tenant form through the handler, checking
// the API's state after each.
func TestTenantForms(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signup("forms")
	ctx := context.Background()

	t.Run("compacted topic", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {"latest"}, "cleanup_policy": {"compact"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		tp, err := b.api().Topic(ctx, "latest")
		if err != nil {
			t.Fatal(err)
		}
		if tp.Config["cleanup.policy"] != "compact" {
			t.Fatalf("config %v, want cleanup.policy=compact", tp.Config)
		}
		resp, body = b.post("/topics", url.Values{"name": {"shredded"}, "cleanup_policy": {"shred"}})
		if resp.StatusCode < 400 {
			t.Fatalf("an unknown cleanup policy: status %d", resp.StatusCode)
		}
		wantContains(t, body, `must be &#34;delete&#34;, &#34;compact&#34; or &#34;compact,delete&#34;`)
	})

	t.Run("topic edit, grow and delete", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {"events"}, "partitions": {"2"}, "retention_hours": {"24"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		resp, body = b.get(resp.Header.Get("Location"))
		wantStatus(t, resp, body, http.StatusOK)
		wantContains(t, body, `<p class="notice" role="status" id="notice">Topic events created.</p>`)
		// A link naming a topic that does not exist claims nothing.
		if _, body = b.get("/topics?created=%3Cb%3Enot-there"); strings.Contains(body, `id="notice"`) {
			t.Fatal("the topics page announces a topic that does not exist")
		}
		resp, body = b.get("/topics/events")
		wantStatus(t, resp, body, http.StatusOK)
		wantContains(t, body, `id="edit-retention" name="retention_hours" type="number" min="1" value="24"`)

		resp, body = b.post("/topics/events", url.Values{"partitions": {"4"}, "retention_hours": {""}, "max_message_bytes": {"2048"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		tp, err := b.api().Topic(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		if _, set := tp.Config["retention.ms"]; tp.Partitions != 4 || set || tp.Config["max.message.bytes"] != "2048" {
			t.Fatalf("after the edit: %d partitions, config %v", tp.Partitions, tp.Config)
		}
		resp, body = b.post("/topics/events", url.Values{"partitions": {"1"}})
		if resp.StatusCode < 400 {
			t.Fatalf("shrinking partitions: status %d", resp.StatusCode)
		}
		wantContains(t, body, `id="update-topic-error"`)

		resp, body = b.post("/topics/events/delete", url.Values{"confirm": {"event"}})
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		wantContains(t, body, `id="delete-topic-error"`)
		resp, body = b.post("/topics/events/delete", url.Values{"confirm": {"events"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if _, err := b.api().Topic(ctx, "events"); err == nil {
			t.Fatal("topic still exists after delete")
		}
	})

	var keyID string
	t.Run("api key with expiry, shown once, revoked", func(t *testing.T) {
		b.get("/api-keys")
		resp, body := b.post("/api-keys", url.Values{"description": {"ci"}, "role": {"viewer"}, "expires": {"2099-01-31"}})
		wantStatus(t, resp, body, http.StatusCreated)
		m := regexp.MustCompile(`id="new-secret">([^<]+)<`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no secret on the page:\n%s", body)
		}
		secret := m[1]
		keys, err := b.api().APIKeys(ctx)
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys %v, %v", keys, err)
		}
		k := keys[0]
		keyID = k.ID
		if k.Role != "viewer" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(time.Date(2099, 2, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("key %+v", k)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatal("the page with the secret may be cached")
		}
		_, body = b.get("/api-keys")
		if strings.Contains(body, secret) || !strings.Contains(body, keyID) {
			t.Fatal("the key list shows the secret again, or lacks the key")
		}
		resp, body = b.post("/api-keys", url.Values{"expires": {"tomorrow"}})
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		wantContains(t, body, `id="create-key-error"`)
	})

	t.Run("acl create and delete", func(t *testing.T) {
		b.get("/acls")
		resp, body := b.post("/acls", url.Values{"principal": {keyID}, "resource_type": {"topic"}, "resource_name": {"orders"},
			"pattern_type": {"prefixed"}, "operation": {"read"}, "permission": {"allow"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		acls, err := b.api().ACLs(ctx)
		if err != nil || len(acls) != 1 || acls[0].PatternType != "prefixed" {
			t.Fatalf("acls %+v, %v", acls, err)
		}
		resp, body = b.post("/acls", url.Values{"principal": {"nobody"}, "resource_type": {"topic"}, "resource_name": {"x"}, "operation": {"read"}})
		wantStatus(t, resp, body, http.StatusBadRequest)
		wantContains(t, body, `id="create-acl-error"`, "principal must be")
		resp, body = b.post("/acls/"+acls[0].ID+"/delete", url.Values{})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if acls, _ := b.api().ACLs(ctx); len(acls) != 0 {
			t.Fatalf("acl not deleted: %+v", acls)
		}
	})

	t.Run("revoke key", func(t *testing.T) {
		resp, body := b.post("/api-keys/"+keyID+"/revoke", url.Values{})
		wantStatus(t, resp, body, http.StatusSeeOther)
		k, err := b.api().APIKey(ctx, keyID)
		if err != nil || k.Status != "revoked" {
			t.Fatalf("key %+v, %v", k, err)
		}
	})

	t.Run("members", func(t *testing.T) {
		b.get("/members")
		resp, body := b.post("/members", url.Values{"email": {"dev@example.com"}, "role": {"developer"}, "password": {"short"}})
		wantStatus(t, resp, body, http.StatusBadRequest)
		wantContains(t, body, `id="add-member-error"`, `value="dev@example.com"`)
		resp, body = b.post("/members", url.Values{"email": {"dev@example.com"}, "role": {"developer"}, "password": {"dev-password-1"}})
		wantStatus(t, resp, body, http.StatusOK)
		wantContains(t, body, `id="notice"`, "We mailed an invitation to dev@example.com")
		if ms, _ := b.api().Members(ctx); len(ms) != 1 {
			t.Fatalf("a member listed before accepting: %+v", ms)
		}
		if _, err := client.New(b.e.url).AcceptInvitation(ctx, b.e.mailToken("dev@example.com")); err != nil {
			t.Fatal(err)
		}
		ms, err := b.api().Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for _, m := range ms {
			if m.Email == "dev@example.com" {
				id = m.UserID
			}
		}
		if id == "" {
			t.Fatalf("member not added: %+v", ms)
		}
		resp, body = b.post("/members/"+id+"/role", url.Values{"role": {"viewer"}})
		wantStatus(t, resp, body, http.StatusSeeOther)
		// The owner is offered no way to change their own role, and a
		// hand-made post is refused before it reaches the API.
		me, err := b.api().Me(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, body = b.get("/members")
		wantContains(t, body, `action="/members/`+id+`/role"`, `<span class="badge" id="own-role">owner</span>`)
		if strings.Contains(body, `action="/members/`+me.UserID+`/role"`) {
			t.Fatal("the owner is offered to change their own role")
		}
		resp, body = b.post("/members/"+me.UserID+"/role", url.Values{"role": {"viewer"}})
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		wantContains(t, body, "you cannot change your own role")
		resp, body = b.post("/members/"+id+"/remove", url.Values{})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if ms, _ := b.api().Members(ctx); len(ms) != 1 {
			t.Fatalf("member not removed: %+v", ms)
		}
	})

	t.Run("empty states", func(t *testing.T) {
		_, body := b.get("/groups")
		wantContains(t, body, "No consumer groups reported yet")
		_, body = b.get("/usage")
		wantContains(t, body, "No usage reported yet", `id="quotas"`)
	})

	t.Run("logout", func(t *testing.T) {
		b.get("/")
		token := b.sessionToken()
		resp, body := b.post("/logout", url.Values{})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if b.sessionToken() != "" {
			t.Fatal("cookie kept after logout")
		}
		if _, err := client.New(e.url, client.WithSession(token)).Me(ctx); err == nil {
			t.Fatal("the session still works after logout")
		}
	})
}
