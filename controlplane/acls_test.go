package controlplane_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// TestTopicACLsBindKeys: the tenant's ACLs apply to API-key callers of the
// topic routes, over their role, as brokers apply them: every deny rule
// stops its operation for an admin and a developer key alike, what no rule
// denies still works, a cluster rule is checked, and the owner's console
// session acts by its role alone.
func TestTopicACLsBindKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.signup("acls")
	dev, _ := e.roleKey(tn, "developer")
	noCreate, noCreateID := e.roleKey(tn, "developer")
	for _, name := range []string{"orders", "frozen", "tuned", "hidden", "opaque", "free"} {
		if _, err := tn.owner.CreateTopic(ctx, api.CreateTopicRequest{Name: name, Config: map[string]string{"retention.ms": "3600000"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []api.CreateACLRequest{
		{Principal: "*", ResourceType: "topic", ResourceName: "orders", Operation: "delete", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "frozen", Operation: "alter", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "tuned", Operation: "alter_configs", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "locked.", PatternType: "prefixed", Operation: "create", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "hidden", Operation: "describe", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "opaque", Operation: "describe_configs", Permission: "deny"},
		{Principal: noCreateID, ResourceType: "cluster", ResourceName: "kafka-cluster", Operation: "create", Permission: "deny"},
	} {
		if _, err := tn.owner.CreateACL(ctx, r); err != nil {
			t.Fatalf("create acl %+v: %v", r, err)
		}
	}
	two := 2
	cfg := map[string]*string{"retention.ms": new(string)}
	*cfg["retention.ms"] = "7200000"
	for _, k := range []struct {
		name string
		c    *client.Client
	}{{"admin key", tn.key}, {"developer key", dev}} {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				do   func() error
			}{
				{"delete denied", func() error { return k.c.DeleteTopic(ctx, "orders") }},
				{"grow denied by alter", func() error {
					_, err := k.c.UpdateTopic(ctx, "frozen", api.UpdateTopicRequest{Partitions: &two})
					return err
				}},
				{"config denied by alter", func() error {
					_, err := k.c.UpdateTopic(ctx, "frozen", api.UpdateTopicRequest{Config: cfg})
					return err
				}},
				{"config denied by alter_configs", func() error {
					_, err := k.c.UpdateTopic(ctx, "tuned", api.UpdateTopicRequest{Config: cfg})
					return err
				}},
				{"create denied by prefix", func() error {
					_, err := k.c.CreateTopic(ctx, api.CreateTopicRequest{Name: "locked." + k.name[:3]})
					return err
				}},
				{"describe denied", func() error {
					_, err := k.c.Topic(ctx, "hidden")
					return err
				}},
				{"describe denied to an empty change", func() error {
					_, err := k.c.UpdateTopic(ctx, "hidden", api.UpdateTopicRequest{})
					return err
				}},
			} {
				t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.do(), "topic_access_denied") })
			}
			// What no rule denies still works.
			if _, err := k.c.UpdateTopic(ctx, "tuned", api.UpdateTopicRequest{Partitions: &two}); err != nil && !client.IsCode(err, "invalid_partitions") {
				t.Fatalf("grow tuned: %v", err)
			}
			if _, err := k.c.CreateTopic(ctx, api.CreateTopicRequest{Name: "open." + k.name[:3]}); err != nil {
				t.Fatalf("create outside the denied prefix: %v", err)
			}
			if _, err := k.c.Topic(ctx, "free"); err != nil {
				t.Fatalf("describe free: %v", err)
			}
			topics, err := k.c.Topics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tp := range topics {
				names = append(names, tp.Name)
			}
			if slices.Contains(names, "hidden") || !slices.Contains(names, "free") {
				t.Fatalf("listed %v: want free and not hidden", names)
			}
			// describe without describe_configs: the topic without its config.
			op, err := k.c.Topic(ctx, "opaque")
			if err != nil {
				t.Fatal(err)
			}
			if len(op.Config) != 0 || len(op.EffectiveConfig) != 0 {
				t.Fatalf("opaque shows its config %v / %v", op.Config, op.EffectiveConfig)
			}
		})
	}
	t.Run("cluster deny on create", func(t *testing.T) {
		_, err := noCreate.CreateTopic(ctx, api.CreateTopicRequest{Name: "anything"})
		wantCode(t, err, "topic_access_denied")
		if _, err := noCreate.UpdateTopic(ctx, "free", api.UpdateTopicRequest{Config: cfg}); err != nil {
			t.Fatalf("the cluster rule denies only create: %v", err)
		}
	})
	t.Run("console session acts by role", func(t *testing.T) {
		if _, err := tn.owner.CreateTopic(ctx, api.CreateTopicRequest{Name: "locked.owner"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tn.owner.UpdateTopic(ctx, "frozen", api.UpdateTopicRequest{Partitions: &two, Config: cfg}); err != nil {
			t.Fatal(err)
		}
		if tp, err := tn.owner.Topic(ctx, "opaque"); err != nil || len(tp.Config) == 0 {
			t.Fatalf("owner reads opaque: %v %v", tp.Config, err)
		}
		if err := tn.owner.DeleteTopic(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
	})
}
