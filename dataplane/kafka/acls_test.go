package kafka_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
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
		ac := kadm.NewClient(cellstack.Client(t, cellstack.Key{ID: k.id, Secret: k.secret}, []string{b.addr}, 20*time.Second))
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

// TestACLAPIs: DescribeAcls, CreateAcls and DeleteAcls manage the tenant's
// ACLs through the control plane: what kadm creates it lists and deletes,
// a created deny stops the very next produce of the key it names and its
// deletion lets the next one through, another tenant neither sees nor
// deletes them, inputs Sluice ACLs cannot express are refused with a
// message saying why, and only a role that may manage ACLs over /v1 may
// do so over Kafka.
func TestACLAPIs(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	tn, other := b.cp.Signup("aclapi", "admin"), b.cp.Signup("aclapi-other", "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type key struct{ id, secret string }
	newKey := func(role string) key {
		k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: role, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return key{k.ID, k.Secret}
	}
	admin, dev, viewer, cl := key{tn.KeyID, tn.Secret}, newKey("developer"), newKey("viewer"), newKey("client")
	otherAdmin := key{other.KeyID, other.Secret}
	waitFor(t, "the keys to reach the broker", func() bool {
		v := b.state.View()
		for _, k := range []key{admin, dev, viewer, cl, otherAdmin} {
			if _, err := v.Authenticate(k.id, k.secret, time.Now()); err != nil {
				return false
			}
		}
		return true
	})
	b.createTopic(t, tn, "orders", 1, nil)
	kcl := func(k key) *kgo.Client {
		return cellstack.Client(t, cellstack.Key{ID: k.id, Secret: k.secret}, []string{b.addr}, 20*time.Second, kgo.ProducerLinger(0), kgo.RecordRetries(3))
	}
	adm := func(k key) *kadm.Client { return kadm.NewClient(kcl(k)) }
	everything := func() *kadm.ACLBuilder {
		return kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().
			Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	}
	describe := func(t *testing.T, ac *kadm.Client, b *kadm.ACLBuilder) kadm.DescribedACLs {
		t.Helper()
		res, err := ac.DescribeACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		var out kadm.DescribedACLs
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe acls: %v: %s", r.Err, r.ErrMessage)
			}
			out = append(out, r.Described...)
		}
		return out
	}
	devProducer := kcl(dev)
	produce := func() error {
		return devProducer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr()
	}
	if err := produce(); err != nil {
		t.Fatalf("produce before any ACL: %v", err)
	}

	ac := adm(admin)
	created, err := ac.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Deny("User:"+dev.id).Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	prefixed, err := ac.CreateACLs(ctx, kadm.NewACLs().Topics("logs.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:*").Operations(kadm.OpRead, kadm.OpDescribe))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(created, prefixed...) {
		if r.Err != nil {
			t.Fatalf("create %s %s on %s: %v: %s", r.Principal, r.Operation, r.Name, r.Err, r.ErrMessage)
		}
	}
	// The deny is in force for the very next request.
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under a deny: got %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	t.Run("describe", func(t *testing.T) {
		all := describe(t, ac, everything())
		if len(all) != 3 {
			t.Fatalf("described %+v, want the 3 created", all)
		}
		got, err := tn.Owner.ACLs(ctx)
		if err != nil || len(got) != 3 {
			t.Fatalf("/v1/acls: %v %+v", err, got)
		}
		deny := describe(t, ac, kadm.NewACLs().Topics("orders").Deny().DenyHosts().Operations(kadm.OpAny))
		if len(deny) != 1 || deny[0].Principal != "User:"+dev.id || deny[0].Host != "*" || deny[0].Operation != kadm.OpWrite ||
			deny[0].Pattern != kadm.ACLPatternLiteral || deny[0].Permission != kmsg.ACLPermissionTypeDeny {
			t.Fatalf("deny on orders: %+v", deny)
		}
		// MATCH finds the rules that apply to a name: the prefixed ones
		// whose prefix starts it.
		match := describe(t, ac, kadm.NewACLs().Topics("logs.app").ResourcePatternType(kadm.ACLPatternMatch).
			Allow().AllowHosts().Operations(kadm.OpAny))
		if len(match) != 2 || match[0].Name != "logs." || match[0].Pattern != kadm.ACLPatternPrefixed || match[0].Principal != "User:*" {
			t.Fatalf("match logs.app: %+v", match)
		}
		if exact := describe(t, ac, kadm.NewACLs().Topics("logs.app").Allow().AllowHosts().Operations(kadm.OpAny)); len(exact) != 0 {
			t.Fatalf("a literal filter on logs.app found %+v", exact)
		}
		// A viewer may list ACLs, as over /v1.
		if v := describe(t, adm(viewer), everything()); len(v) != 3 {
			t.Fatalf("viewer described %+v", v)
		}
	})

	t.Run("another tenant", func(t *testing.T) {
		oac := adm(otherAdmin)
		if seen := describe(t, oac, everything()); len(seen) != 0 {
			t.Fatalf("another tenant described %+v", seen)
		}
		del, err := oac.DeleteACLs(ctx, everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range del {
			if r.Err != nil || len(r.Deleted) != 0 {
				t.Fatalf("another tenant's delete: %v %+v", r.Err, r.Deleted)
			}
		}
		if all := describe(t, ac, everything()); len(all) != 3 {
			t.Fatalf("after another tenant's delete: %+v", all)
		}
		// Naming this tenant's key is refused as over /v1: no such key.
		res, err := oac.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:"+dev.id).Operations(kadm.OpRead))
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, kerr.ResourceNotFound) {
			t.Fatalf("another tenant's ACL naming this tenant's key: %v: %s", res[0].Err, res[0].ErrMessage)
		}
	})

	t.Run("roles", func(t *testing.T) {
		res, err := adm(dev).CreateACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:*").Operations(kadm.OpRead))
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("developer create: %v", res[0].Err)
		}
		del, err := adm(dev).DeleteACLs(ctx, everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range del {
			if !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) || len(r.Deleted) != 0 {
				t.Fatalf("developer delete: %v %+v", r.Err, r.Deleted)
			}
		}
		// Even a filter that matches nothing is refused, as in Kafka.
		none, err := adm(dev).DeleteACLs(ctx, kadm.NewACLs().Topics("nothing").Allow().AllowHosts().Operations(kadm.OpAny))
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(none[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("developer delete matching nothing: %v", none[0].Err)
		}
		desc, err := adm(cl).DescribeACLs(ctx, everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range desc {
			if !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
				t.Fatalf("client-role describe: %v", r.Err)
			}
		}
	})

	t.Run("bad inputs", func(t *testing.T) {
		raw := kcl(admin)
		good := func() kmsg.CreateACLsRequestCreation {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host = "User:"+dev.id, "*"
			c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			return c
		}
		for _, tc := range []struct {
			name, want string
			edit       func(*kmsg.CreateACLsRequestCreation)
		}{
			{"a host", "host", func(c *kmsg.CreateACLsRequestCreation) { c.Host = "10.0.0.1" }},
			{"a transactional id", "resource type", func(c *kmsg.CreateACLsRequestCreation) {
				c.ResourceType = kmsg.ACLResourceTypeTransactionalId
			}},
			{"cluster action", "operation", func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationClusterAction }},
			{"idempotent write", "operation", func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationIdempotentWrite }},
			{"a group principal", "principal", func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "Group:ops" }},
			{"a match pattern", "pattern type", func(c *kmsg.CreateACLsRequestCreation) {
				c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch
			}},
			{"a bad key id", "principal", func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "User:nobody" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := good()
				tc.edit(&c)
				req := kmsg.NewPtrCreateACLsRequest()
				req.Creations = []kmsg.CreateACLsRequestCreation{c}
				resp, err := req.RequestWith(ctx, raw)
				if err != nil {
					t.Fatal(err)
				}
				r := resp.Results[0]
				if !errors.Is(kerr.ErrorForCode(r.ErrorCode), kerr.InvalidRequest) || r.ErrorMessage == nil ||
					!strings.Contains(*r.ErrorMessage, tc.want) {
					t.Fatalf("got %v %v, want INVALID_REQUEST about the %s", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, tc.want)
				}
			})
		}
		t.Run("a host in a filter", func(t *testing.T) {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			req.Host = kmsg.StringPtr("10.0.0.1")
			resp, err := req.RequestWith(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.InvalidRequest) || resp.ErrorMessage == nil ||
				!strings.Contains(*resp.ErrorMessage, "host") {
				t.Fatalf("got %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
			}
		})
		if all := describe(t, ac, everything()); len(all) != 3 {
			t.Fatalf("bad inputs created ACLs: %+v", all)
		}
	})

	t.Run("delete", func(t *testing.T) {
		del, err := ac.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Deny("User:"+dev.id).DenyHosts().Operations(kadm.OpWrite))
		if err != nil {
			t.Fatal(err)
		}
		if len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 || del[0].Deleted[0].Err != nil ||
			del[0].Deleted[0].Principal != "User:"+dev.id || del[0].Deleted[0].Operation != kadm.OpWrite {
			t.Fatalf("delete the deny: %+v", del)
		}
		// The deletion is in force for the very next request too.
		if err := produce(); err != nil {
			t.Fatalf("produce after the deny's deletion: %v", err)
		}
		del, err = ac.DeleteACLs(ctx, everything())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(del[0].Deleted); n != 2 {
			t.Fatalf("delete everything deleted %d, want the 2 left: %+v", n, del)
		}
		if all := describe(t, ac, everything()); len(all) != 0 {
			t.Fatalf("left after deleting everything: %+v", all)
		}
	})
}

// TestACLAPIsNeedAControlPlane: a listener without a control-plane client
// does not advertise DescribeAcls, CreateAcls or DeleteAcls; one with it
// does.
func TestACLAPIsNeedAControlPlane(t *testing.T) {
	for _, tc := range []struct {
		name string
		cp   bool
	}{{"without a control plane", false}, {"with a control plane", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, brokerOpts{controlPlane: tc.cp})
			rc := dialRaw(t, b.addr)
			resp := apiVersions(t, rc)
			seen := 0
			for _, k := range resp.ApiKeys {
				switch k.ApiKey {
				case 29, 30, 31:
					seen++
				}
			}
			if want := map[bool]int{false: 0, true: 3}[tc.cp]; seen != want {
				t.Fatalf("advertised %d of the ACL APIs, want %d", seen, want)
			}
		})
	}
}
