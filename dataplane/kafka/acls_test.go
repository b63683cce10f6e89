package kafka_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
)

// TestAdminACLs: Kafka's administrative requests obey the tenant's ACLs as
// produce and fetch do, for an admin and a developer key alike:
// DeleteTopics needs delete, CreatePartitions alter, CreateTopics create on
// the topic (a prefixed deny stops it) and on the cluster (a cluster deny
// stops every name), DescribeConfigs describe_configs (on the cluster for
// broker resources), Metadata describe. What no rule denies still works.
func TestAdminACLs(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	tn := b.cp.Signup("kacl", "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type key struct{ name, id, secret string }
	newKey := func(role string) key {
		k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: role, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return key{role + " key", k.ID, k.Secret}
	}
	admin, dev, noCluster := key{"admin key", tn.KeyID, tn.Secret}, newKey("developer"), newKey("developer")
	for _, name := range []string{"orders", "frozen", "tuned", "hidden", "opaque", "free"} {
		b.createTopic(t, tn, name, 1, map[string]string{"retention.ms": "3600000"})
	}
	for _, r := range []api.CreateACLRequest{
		{Principal: "*", ResourceType: "topic", ResourceName: "orders", Operation: "delete", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "frozen", Operation: "alter", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "locked.", PatternType: "prefixed", Operation: "create", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "hidden", Operation: "describe", Permission: "deny"},
		{Principal: "*", ResourceType: "topic", ResourceName: "opaque", Operation: "describe_configs", Permission: "deny"},
		{Principal: noCluster.id, ResourceType: "cluster", ResourceName: "kafka-cluster", Operation: "create", Permission: "deny"},
		{Principal: noCluster.id, ResourceType: "cluster", ResourceName: "kafka-cluster", Operation: "describe_configs", Permission: "deny"},
	} {
		if _, err := tn.Owner.CreateACL(ctx, r); err != nil {
			t.Fatalf("create acl %+v: %v", r, err)
		}
	}
	// The broker evaluates describe and describe_configs from its state:
	// wait until the rules are there.
	waitFor(t, "the ACLs to reach the broker", func() bool {
		v := b.state.View()
		p, err := v.Authenticate(noCluster.id, noCluster.secret, time.Now())
		return err == nil && !v.Allowed(p, authz.ResourceCluster, authz.ClusterName, authz.OpDescribeConfigs) &&
			!v.Allowed(p, authz.ResourceTopic, "hidden", authz.OpDescribe)
	})
	adm := func(k key) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.SASL(plain.Auth{User: k.id, Pass: k.secret}.AsMechanism()),
			kgo.RetryTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		ac := kadm.NewClient(cl)
		ac.SetTimeoutMillis(20_000)
		return ac
	}
	wantErr := func(t *testing.T, what string, got, want error) {
		t.Helper()
		if !errors.Is(got, want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
	for _, k := range []key{admin, dev} {
		t.Run(k.name, func(t *testing.T) {
			ac := adm(k)
			del, err := ac.DeleteTopics(ctx, "orders")
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, "delete orders", del["orders"].Err, kerr.TopicAuthorizationFailed)
			grow, err := ac.UpdatePartitions(ctx, 2, "frozen")
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, "grow frozen", grow["frozen"].Err, kerr.TopicAuthorizationFailed)
			locked := "locked." + k.name[:3]
			cr, err := ac.CreateTopics(ctx, 1, -1, nil, locked)
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, "create "+locked, cr[locked].Err, kerr.TopicAuthorizationFailed)
			// kadm answers an authorization failure as the call's error.
			_, err = ac.DescribeTopicConfigs(ctx, "opaque")
			wantErr(t, "describe configs of opaque", err, kerr.TopicAuthorizationFailed)
			cfgs, err := ac.DescribeTopicConfigs(ctx, "free")
			if free, _ := cfgs.On("free", nil); err != nil || free.Err != nil || len(free.Configs) == 0 {
				t.Fatalf("describe configs of free: %v %v %v", err, free.Configs, free.Err)
			}
			topics, err := ac.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if names := topics.Names(); slices.Contains(names, "hidden") || !slices.Contains(names, "frozen") {
				t.Fatalf("listed %v: want frozen and not hidden", names)
			}
			_, err = ac.ListTopics(ctx, "hidden")
			wantErr(t, "metadata of hidden", err, kerr.TopicAuthorizationFailed)

			// What no rule denies still works.
			open := "open." + k.name[:3]
			if cr, err := ac.CreateTopics(ctx, 1, -1, nil, open); err != nil || cr[open].Err != nil {
				t.Fatalf("create %s: %v %v", open, err, cr[open].Err)
			}
			if grow, err := ac.UpdatePartitions(ctx, 2, open); err != nil || grow[open].Err != nil {
				t.Fatalf("grow %s: %v %v", open, err, grow[open].Err)
			}
			if del, err := ac.DeleteTopics(ctx, open); err != nil || del[open].Err != nil {
				t.Fatalf("delete %s: %v %v", open, err, del[open].Err)
			}
			if bc, err := ac.DescribeBrokerConfigs(ctx); err != nil || bc[0].Err != nil {
				t.Fatalf("describe broker configs: %v %v", err, bc)
			}
		})
	}
	t.Run("cluster rules", func(t *testing.T) {
		ac := adm(noCluster)
		cr, err := ac.CreateTopics(ctx, 1, -1, nil, "anything")
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "create under a cluster deny", cr["anything"].Err, kerr.TopicAuthorizationFailed)
		_, err = ac.DescribeBrokerConfigs(ctx)
		wantErr(t, "describe broker configs under a cluster deny", err, kerr.ClusterAuthorizationFailed)
		if grow, err := ac.UpdatePartitions(ctx, 3, "free"); err != nil || grow["free"].Err != nil {
			t.Fatalf("the cluster rules deny only create and describe_configs: %v %v", err, grow["free"].Err)
		}
	})
}
