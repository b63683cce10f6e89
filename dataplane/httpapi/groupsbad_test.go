package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
)

// TestGroupBadInput: the group endpoints' refusals, each with its
// catalogue error, on every broker (coordinator or not); another tenant's
// group answers as a missing one.
func TestGroupBadInput(t *testing.T) {
	c := startCell(t, cellOpts{})
	ctx := context.Background()
	tn := c.tenant("acme")
	other := c.tenant("globex")
	c.topic(tn, "jobs", 2, nil)
	c.topic(other, "theirs", 1, nil)
	c.coordinator(tn, "workers")
	jr := c.join(tn, 0, "workers", map[string]any{"topics": []string{"jobs"}})
	// globex's own group with a member, which acme must not find.
	c.coordinator(other, "private")
	ojr := c.join(other, 1, "private", map[string]any{"topics": []string{"theirs"}})
	// A key that may read the topic but not use groups.
	noGroup, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "no groups", Role: "client"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.Owner.CreateACL(ctx, api.CreateACLRequest{Principal: noGroup.ID, ResourceType: "topic", ResourceName: "jobs", Operation: "read"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key and its ACL on every broker", func() bool {
		for _, b := range c.brokers {
			v := b.syncer.View()
			p, err := v.Authenticate(noGroup.ID, noGroup.Secret, timeNow())
			if err != nil || !v.Allowed(p, "topic", "jobs", "read") {
				return false
			}
		}
		return true
	})

	fetch := groupPath("workers", "/messages:fetch")
	commit := groupPath("workers", "/offsets:commit")
	nack := groupPath("workers", "/messages:nack")
	gen := jr.Generation
	cases := []struct {
		name       string
		method     string
		path       string
		id, secret string
		body       any
		status     int
		code       string
	}{
		{"join malformed json", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":`, 400, "malformed_json"},
		{"join wrong type", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":"jobs"}`, 400, "invalid_request"},
		{"join unknown field", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":["jobs"],"colour":1}`, 400, "unknown_field"},
		{"join no topics", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":[]}`, 400, "invalid_request"},
		{"join unknown topic", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":["nope"]}`, 404, "topic_not_found"},
		{"join other tenant's topic", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":["theirs"]}`, 404, "topic_not_found"},
		{"join bad reset", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":["jobs"],"auto_offset_reset":"middle"}`, 400, "invalid_request"},
		{"join bad session timeout", "POST", groupPath("workers", "/members"), tn.KeyID, tn.Secret, `{"topics":["jobs"],"session_timeout_ms":10}`, 400, "invalid_session_timeout"},
		{"join without group ACL", "POST", groupPath("workers", "/members"), noGroup.ID, noGroup.Secret, `{"topics":["jobs"]}`, 403, "group_access_denied"},
		{"fetch without generation", "POST", fetch, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID}, 400, "invalid_request"},
		{"fetch wrong type", "POST", fetch, tn.KeyID, tn.Secret, `{"member_id":"x","generation":"one"}`, 400, "invalid_request"},
		{"fetch unknown member", "POST", fetch, tn.KeyID, tn.Secret, map[string]any{"member_id": "nobody", "generation": gen}, 409, "unknown_member"},
		{"fetch stale generation", "POST", fetch, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen - 1}, 409, "illegal_generation"},
		{"fetch unknown group", "POST", groupPath("nobody-here", "/messages:fetch"), tn.KeyID, tn.Secret, map[string]any{"member_id": ojr.MemberID, "generation": ojr.Generation}, 409, "unknown_member"},
		{"fetch other tenant's group", "POST", groupPath("private", "/messages:fetch"), tn.KeyID, tn.Secret, map[string]any{"member_id": ojr.MemberID, "generation": ojr.Generation}, 409, "unknown_member"},
		{"fetch without group ACL", "POST", fetch, noGroup.ID, noGroup.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen}, 403, "group_access_denied"},
		{"fetch bad max_bytes", "POST", fetch, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "max_bytes": -1}, 400, "invalid_fetch_size"},
		{"commit stale generation", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen + 5, "offsets": []any{map[string]any{"topic": "jobs", "partition": 0, "offset": 1}}}, 409, "illegal_generation"},
		{"commit unknown topic", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "offsets": []any{map[string]any{"topic": "nope", "partition": 0, "offset": 1}}}, 404, "topic_not_found"},
		{"commit other tenant's topic", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "offsets": []any{map[string]any{"topic": "theirs", "partition": 0, "offset": 1}}}, 404, "topic_not_found"},
		{"commit unknown partition", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "offsets": []any{map[string]any{"topic": "jobs", "partition": 9, "offset": 1}}}, 404, "partition_not_found"},
		{"commit negative offset", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "offsets": []any{map[string]any{"topic": "jobs", "partition": 0, "offset": -4}}}, 400, "invalid_request"},
		{"commit nothing", "POST", commit, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "offsets": []any{}}, 400, "invalid_request"},
		{"nack without offset", "POST", nack, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "topic": "jobs", "partition": 0}, 400, "invalid_request"},
		{"nack unknown partition", "POST", nack, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "topic": "jobs", "partition": 5, "offset": 0}, 404, "partition_not_found"},
		{"nack other tenant's topic", "POST", nack, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen, "topic": "theirs", "partition": 0, "offset": 0}, 404, "topic_not_found"},
		{"nack stale generation", "POST", nack, tn.KeyID, tn.Secret, map[string]any{"member_id": jr.MemberID, "generation": gen - 1, "topic": "jobs", "partition": 0, "offset": 0}, 409, "illegal_generation"},
		{"reset bad target", "POST", groupPath("workers", "/offsets:reset"), tn.KeyID, tn.Secret, `{"topic":"jobs","to":"yesterday"}`, 400, "invalid_request"},
		{"reset offset missing", "POST", groupPath("workers", "/offsets:reset"), tn.KeyID, tn.Secret, `{"topic":"jobs","to":"offset"}`, 400, "invalid_request"},
		{"reset with members", "POST", groupPath("workers", "/offsets:reset"), tn.KeyID, tn.Secret, `{"topic":"jobs","to":"earliest"}`, 409, "group_not_empty"},
		{"redrive without dead letters", "POST", groupPath("workers", "/dead-letters:redrive"), tn.KeyID, tn.Secret, `{}`, 404, "topic_not_found"},
		{"redrive bad max", "POST", groupPath("workers", "/dead-letters:redrive"), tn.KeyID, tn.Secret, `{"max_messages":5000}`, 400, "invalid_request"},
		{"leave without credentials", "DELETE", groupPath("workers", "/members/"+jr.MemberID), "", "", nil, 401, "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for b := range c.brokers {
				s, raw := c.call(b, tc.method, tc.path, tc.id, tc.secret, tc.body)
				if e := decodeError(t, raw); s != tc.status || e.Code != tc.code {
					t.Fatalf("broker %d: %d %+v, want %d %s", b, s, e, tc.status, tc.code)
				}
			}
		})
	}
	// A nack of an offset not delivered yet changes nothing: the message
	// will be delivered anyway.
	var out map[string]any
	if s := c.as(tn, 1, "POST", nack, map[string]any{"member_id": jr.MemberID, "generation": gen, "topic": "jobs", "partition": 0, "offset": 50}, &out); s != http.StatusOK || out["action"] != "redeliver" {
		t.Fatalf("nack of an undelivered offset: %d %v", s, out)
	}
	// The member is still fine after all that.
	if s, _, e := c.fetch(tn, 2, "workers", jr, 0); s != http.StatusOK {
		t.Fatalf("fetch: %d %+v", s, e)
	}
}
