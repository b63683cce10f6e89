package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestDeadLetterTopicNeedsCreate: a nack that dead-letters a message
// creates the group's dead-letter topic only for a caller whose ACLs allow
// create on it: a deny on the topic, or on the cluster, refuses with
// topic_access_denied and creates nothing, while a caller who may create
// gets its dead letter.
func TestDeadLetterTopicNeedsCreate(t *testing.T) {
	c := startCell(t, cellOpts{retryAttempts: 1})
	tn := c.tenant("acme")
	ctx := context.Background()
	k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "no cluster create", Role: "developer"})
	if err != nil {
		t.Fatal(err)
	}
	dev := *tn
	dev.KeyID, dev.Secret = k.ID, k.Secret
	c.waitKey(dev.KeyID, dev.Secret, true)
	for _, r := range []api.CreateACLRequest{
		{Principal: "*", ResourceType: "topic", ResourceName: "crew.dlq", Operation: "create", Permission: "deny"},
		{Principal: dev.KeyID, ResourceType: "cluster", ResourceName: "kafka-cluster", Operation: "create", Permission: "deny"},
	} {
		if _, err := tn.Owner.CreateACL(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	celltest.WaitFor(t, wait, "the ACLs on every broker", func() bool {
		for _, b := range c.brokers {
			v := b.syncer.View()
			p, err := v.Authenticate(dev.KeyID, dev.Secret, time.Now())
			if err != nil || v.Allowed(p, authz.ResourceTopic, "squad.dlq", authz.OpCreate) {
				return false
			}
		}
		return true
	})
	c.topic(tn, "tasks", 1, nil)
	publishN(c, tn, "tasks", 0, 1)

	// nack joins group, fetches offset 0 and nacks it: with one attempt
	// allowed, the nack dead-letters it.
	nack := func(who *cptest.Tenant, group string) (int, []byte) {
		t.Helper()
		jr := c.join(who, 0, group, map[string]any{"topics": []string{"tasks"}})
		celltest.WaitFor(t, wait, "offset 0 delivered to "+group, func() bool {
			s, fr, e := c.fetch(who, 0, group, jr, 500)
			if s != http.StatusOK {
				t.Fatalf("fetch: %d %+v", s, e)
			}
			return len(fr.Messages) > 0
		})
		return c.call(0, http.MethodPost, groupPath(group, "/messages:nack"), who.KeyID, who.Secret,
			map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "topic": "tasks", "partition": 0, "offset": 0, "error": "boom"})
	}
	for _, tc := range []struct {
		name  string
		who   *cptest.Tenant
		group string
	}{
		{"deny create on the topic", tn, "crew"},
		{"deny create on the cluster", &dev, "squad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, raw := nack(tc.who, tc.group)
			if e := decodeError(t, raw); s != http.StatusForbidden || e.Code != "topic_access_denied" {
				t.Fatalf("nack: %d %+v, want 403 topic_access_denied", s, e)
			}
			if _, err := tn.Key.Topic(ctx, tc.group+".dlq"); err == nil {
				t.Fatalf("%s.dlq was created", tc.group)
			}
		})
	}
	t.Run("allowed", func(t *testing.T) {
		s, raw := nack(tn, "team")
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil || s != http.StatusOK || out["action"] != "dead_letter" {
			t.Fatalf("nack: %d %s", s, raw)
		}
	})
}
