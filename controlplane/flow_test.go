package controlplane_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The README's tour: signup, create a key, create a topic with the key, list
// topics, revoke the key, and the revoked key is refused.
func TestReadmeFlow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.signUp(ctx, api.SignupRequest{TenantName: "acme", Email: "ops@acme.test", Password: "correct horse 9"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tenant.HomeCellID != "cell-1" || res.Tenant.PoolID != "shared-1" || res.Session.Role != "owner" {
		t.Fatalf("signup placed tenant at %s/%s with role %s", res.Tenant.PoolID, res.Tenant.HomeCellID, res.Session.Role)
	}
	owner := e.anon.With(client.WithSession(res.Session.Token))
	k := e.createKey(owner, api.CreateAPIKeyRequest{Description: "ci"})
	if k.Secret == "" || k.Role != "developer" || k.Status != "active" {
		t.Fatalf("created key %+v", k)
	}
	withKey := e.anon.With(client.WithAPIKey(k.ID, k.Secret))
	tp, err := withKey.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Partitions != 6 || tp.ReplicationFactor != 3 || len(tp.Assignments) != 6 {
		t.Fatalf("topic %+v", tp)
	}
	topics, err := withKey.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || topics[0].Name != "orders" {
		t.Fatalf("topics = %+v", topics)
	}
	keys, err := owner.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].Secret != "" || keys[0].LastUsedAt == nil {
		t.Fatalf("listed keys %+v: want one key, no secret, a last-used time", keys)
	}
	if _, err := owner.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = withKey.Topics(ctx)
	wantCode(t, err, "key_revoked")
	if err.(*client.Error).Status != 401 {
		t.Fatalf("revoked key got status %d, want 401", err.(*client.Error).Status)
	}
	// A wrong secret for a live key is a plain 401 that says nothing more.
	k2 := e.createKey(owner, api.CreateAPIKeyRequest{})
	_, err = e.anon.With(client.WithAPIKey(k2.ID, "wrong")).Topics(ctx)
	wantCode(t, err, "unauthenticated")
}

// Partition placement spreads preferred leaders across the cell's brokers,
// and partitions only grow.
func TestTopicPlacementAndGrowth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("alpha")
	tp, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "events", Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int]int{}
	for _, p := range tp.Assignments {
		if len(p.Replicas) != 3 {
			t.Fatalf("partition %d replicas %v", p.Partition, p.Replicas)
		}
		r := slices.Clone(p.Replicas)
		slices.Sort(r)
		if !slices.Equal(r, []int{1, 2, 3}) {
			t.Fatalf("partition %d replicas %v are not the cell's three brokers", p.Partition, p.Replicas)
		}
		leaders[p.Replicas[0]]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("preferred leaders %v, want 2 per broker", leaders)
	}
	n := 9
	tp, err = a.key.UpdateTopic(ctx, "events", api.UpdateTopicRequest{Partitions: &n})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Partitions != 9 || len(tp.Assignments) != 9 {
		t.Fatalf("after growth: %d partitions, %d assignments", tp.Partitions, len(tp.Assignments))
	}
	n = 3
	_, err = a.key.UpdateTopic(ctx, "events", api.UpdateTopicRequest{Partitions: &n})
	wantCode(t, err, "partitions_cannot_shrink")

	v := "3600000"
	tp, err = a.key.UpdateTopic(ctx, "events", api.UpdateTopicRequest{Config: map[string]*string{"retention.ms": &v}})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Config["retention.ms"] != v || tp.EffectiveConfig["retention.ms"] != v || tp.EffectiveConfig["cleanup.policy"] != "delete" {
		t.Fatalf("config %v effective %v", tp.Config, tp.EffectiveConfig)
	}
	tp, err = a.key.UpdateTopic(ctx, "events", api.UpdateTopicRequest{Config: map[string]*string{"retention.ms": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if _, set := tp.Config["retention.ms"]; set || tp.EffectiveConfig["retention.ms"] != "604800000" {
		t.Fatalf("reset config %v effective %v", tp.Config, tp.EffectiveConfig)
	}
	// Compaction may be turned on for an existing delete topic, and off
	// again (the brokers re-cut the replicas' segments identically first).
	for _, policy := range []string{"compact", "delete", "compact,delete"} {
		tp, err = a.key.UpdateTopic(ctx, "events", api.UpdateTopicRequest{Config: map[string]*string{"cleanup.policy": &policy}})
		if err != nil {
			t.Fatalf("cleanup.policy=%s on an existing topic: %v", policy, err)
		}
		if tp.EffectiveConfig["cleanup.policy"] != policy {
			t.Fatalf("cleanup.policy=%s: effective %v", policy, tp.EffectiveConfig)
		}
	}
	// Validate-only changes nothing.
	_, err = a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "dry", ValidateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.key.Topic(ctx, "dry")
	wantCode(t, err, "topic_not_found")
	if err := a.key.DeleteTopic(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	_, err = a.key.Topic(ctx, "events")
	wantCode(t, err, "topic_not_found")
}

func TestTopicQuotas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("quota")
	q, err := e.op.AdminQuotas(ctx, a.Tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	q.MaxTopics, q.MaxPartitions = 2, 5
	if _, err := e.op.AdminSetQuotas(ctx, a.Tenant.ID, q); err != nil {
		t.Fatal(err)
	}
	got, err := a.key.Quotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxTopics != 2 || got.MaxPartitions != 5 {
		t.Fatalf("tenant reads quotas %+v", got)
	}
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "a", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "b", Partitions: 3})
	wantCode(t, err, "quota_exceeded")
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "b", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "c", Partitions: 1})
	wantCode(t, err, "quota_exceeded")
	_, err = a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "big", Config: map[string]string{"max.message.bytes": "999999999"}})
	wantCode(t, err, "quota_exceeded")
	// Tenants read their quotas but cannot write them.
	_, err = a.key.AdminSetQuotas(ctx, a.Tenant.ID, q)
	wantCode(t, err, "permission_denied")
}

// Two active keys at once let a client rotate without downtime; the cap on
// active keys is enforced.
func TestKeyRotationAndCap(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("rotate")
	newKey := e.createKey(a.owner, api.CreateAPIKeyRequest{Description: "next"})
	nk := e.anon.With(client.WithAPIKey(newKey.ID, newKey.Secret))
	for _, c := range []*client.Client{a.key, nk} {
		if _, err := c.Topics(ctx); err != nil {
			t.Fatalf("both keys should work during rotation: %v", err)
		}
	}
	if _, err := a.owner.RevokeAPIKey(ctx, a.keyID); err != nil {
		t.Fatal(err)
	}
	if _, err := nk.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 9; i++ { // one active key plus nine reaches the cap of ten
		e.createKey(a.owner, api.CreateAPIKeyRequest{})
	}
	_, err := a.owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{})
	wantCode(t, err, "quota_exceeded")
	// A developer key cannot mint an admin key.
	_, err = nk.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Role: "admin"})
	wantCode(t, err, "permission_denied")
}
