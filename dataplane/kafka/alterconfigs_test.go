package kafka_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
)

// TestAlterConfigs: kadm changes topic settings through IncrementalAlter-
// Configs (SET, DELETE; APPEND and SUBTRACT refused for non-list keys) and
// AlterConfigs (the keys given, every other one back to its default), and
// DescribeConfigs shows the new values at once, each key a topic
// override while set and a default otherwise; validate_only changes
// nothing; an unknown topic, an unknown key, a bad value and a deny on
// alter_configs each get their own Kafka code and a message, and leave
// the topic as it was.
func TestAlterConfigs(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	a := b.cp.Signup("alterco", "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dev, err := a.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "dev", Role: "developer"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForKey(t, a)
	b.waitForSecret(t, "the developer key", dev.ID, dev.Secret)
	b.createTopic(t, a, "settings", 1, map[string]string{"retention.ms": "3600000"})
	adm := kadm.NewClient(b.client(t, a))
	str := func(s string) *string { return &s }
	config := func(key string) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "settings")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe configs: %v %+v", err, rcs)
		}
		for _, c := range rcs[0].Configs {
			if c.Key == key && c.Value != nil {
				return c
			}
		}
		t.Fatalf("DescribeConfigs has no %s: %+v", key, rcs[0].Configs)
		return kadm.Config{}
	}
	describe := func(key string) string { t.Helper(); return *config(key).Value }
	// A key the tenant set is a topic override; any other is a default,
	// and its one synonym (kadm asks for them) is itself.
	source := func(key string, want kmsg.ConfigSource) {
		t.Helper()
		c := config(key)
		if c.Source != want || len(c.Synonyms) != 1 || c.Synonyms[0].Source != want || *c.Synonyms[0].Value != *c.Value {
			t.Fatalf("%s: source %v, synonyms %+v; want %v", key, c.Source, c.Synonyms, want)
		}
	}
	source("retention.ms", kmsg.ConfigSourceDynamicTopicConfig) // set at creation
	source("cleanup.policy", kmsg.ConfigSourceDefaultConfig)
	one := func(rs kadm.AlterConfigsResponses, err error) kadm.AlterConfigsResponse {
		t.Helper()
		if err != nil || len(rs) != 1 {
			t.Fatalf("alter configs: %v %+v", err, rs)
		}
		return rs[0]
	}

	// Incremental SET, then DELETE back to the default.
	if r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("7200000")}}, "settings")); r.Err != nil {
		t.Fatalf("SET retention.ms: %v %s", r.Err, r.ErrMessage)
	}
	if got := describe("retention.ms"); got != "7200000" {
		t.Fatalf("retention.ms after SET: %s", got)
	}
	if r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "settings")); r.Err != nil {
		t.Fatalf("DELETE retention.ms: %v %s", r.Err, r.ErrMessage)
	}
	tp, err := a.Key.Topic(ctx, "settings") // tp.EffectiveConfig: the defaults, below
	if err != nil {
		t.Fatal(err)
	}
	if _, set := tp.Config["retention.ms"]; set || describe("retention.ms") != tp.EffectiveConfig["retention.ms"] {
		t.Fatalf("retention.ms after DELETE: set %v, described %s, effective %s", tp.Config, describe("retention.ms"), tp.EffectiveConfig["retention.ms"])
	}
	source("retention.ms", kmsg.ConfigSourceDefaultConfig)
	// APPEND and SUBTRACT are for list keys; on a number they are refused.
	r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: str("5")}}, "settings"))
	if !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, "not a list") {
		t.Fatalf("APPEND to retention.ms: %v %q", r.Err, r.ErrMessage)
	}
	// SUBTRACT of a value a list does not hold leaves it as it is.
	if r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: str("compact")}}, "settings")); r.Err != nil {
		t.Fatalf("SUBTRACT from cleanup.policy: %v %s", r.Err, r.ErrMessage)
	}
	if got := describe("cleanup.policy"); got != "delete" {
		t.Fatalf("cleanup.policy after SUBTRACT: %s", got)
	}

	// AlterConfigs: the keys given; the others back to their defaults.
	if r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("1800000")}}, "settings")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := one(adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: str("2048")}}, "settings")); r.Err != nil {
		t.Fatalf("AlterConfigs: %v %s", r.Err, r.ErrMessage)
	}
	if got, ret := describe("max.message.bytes"), describe("retention.ms"); got != "2048" || ret != tp.EffectiveConfig["retention.ms"] {
		t.Fatalf("after AlterConfigs: max.message.bytes %s, retention.ms %s (default %s)", got, ret, tp.EffectiveConfig["retention.ms"])
	}
	source("max.message.bytes", kmsg.ConfigSourceDynamicTopicConfig)
	source("retention.ms", kmsg.ConfigSourceDefaultConfig)

	// validate_only checks and changes nothing.
	if r := one(adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: str("4096")}}, "settings")); r.Err != nil {
		t.Fatalf("validate only: %v %s", r.Err, r.ErrMessage)
	}
	if r := one(adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("soon")}}, "settings")); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("validate only a bad value: %v %s", r.Err, r.ErrMessage)
	}

	// Refusals, each specific, and nothing changed.
	if _, err := a.Key.CreateACL(ctx, api.CreateACLRequest{Principal: dev.ID, ResourceType: "topic", ResourceName: "settings",
		Operation: "alter_configs", Permission: "deny"}); err != nil {
		t.Fatal(err)
	}
	devCl := cellstack.Client(t, cellstack.Key{ID: dev.ID, Secret: dev.Secret}, []string{b.addr}, 20*time.Second)
	for _, tc := range []struct {
		name    string
		adm     *kadm.Client
		topic   string
		cfg     kadm.AlterConfig
		want    error
		message string
	}{
		{"unknown topic", adm, "nope", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: str("1000")}, kerr.UnknownTopicOrPartition, "nope"},
		{"unknown key", adm, "settings", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.minutes", Value: str("1")}, kerr.InvalidConfig, "retention.minutes"},
		{"bad value", adm, "settings", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: str("soon")}, kerr.InvalidConfig, "retention.ms"},
		{"SET without a value", adm, "settings", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"}, kerr.InvalidConfig, "SET needs a value"},
		{"DELETE of an unknown key", adm, "settings", kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.minutes"}, kerr.InvalidConfig, "retention.minutes"},
		{"denied alter_configs", kadm.NewClient(devCl), "settings", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: str("1000")}, kerr.TopicAuthorizationFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := one(tc.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.cfg}, tc.topic))
			if !errors.Is(r.Err, tc.want) || r.ErrMessage == "" || !strings.Contains(r.ErrMessage, tc.message) {
				t.Fatalf("got %v %q, want %v with %q", r.Err, r.ErrMessage, tc.want, tc.message)
			}
		})
	}
	if got := describe("max.message.bytes"); got != "2048" {
		t.Fatalf("max.message.bytes after the refusals: %s", got)
	}
	if got := describe("retention.ms"); got != tp.EffectiveConfig["retention.ms"] {
		t.Fatalf("retention.ms after the refusals: %s", got)
	}

	// ApiVersions names both.
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vs {
		for _, key := range []int16{33, 44} {
			if _, _, ok := bv.KeyVersions(key); !ok {
				t.Errorf("ApiVersions lacks key %d", key)
			}
		}
	}
}

// TestTopicSettingsRefusedOverKafka: CreateTopics, AlterConfigs and
// IncrementalAlterConfigs refuse bad topic settings with /v1's rules and
// a specific Kafka code and message: a retention above the plan
// (POLICY_VIOLATION), Kafka's -1 "keep forever", negative and non-numeric
// values and a segment.bytes below 1 MiB (INVALID_CONFIG); nothing is
// created or changed.
func TestTopicSettingsRefusedOverKafka(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	a := b.cp.Signup("badsettings", "admin")
	b.waitForKey(t, a)
	b.createTopic(t, a, "kept", 1, map[string]string{"retention.ms": "3600000"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t, a))
	for _, tc := range []struct {
		name, key, value string
		want             error
		message          string
	}{
		{"retention above the plan", "retention.ms", "604800001", kerr.PolicyViolation, "above the tenant's limit"},
		{"retention forever", "retention.ms", "-1", kerr.InvalidConfig, "keep forever"},
		{"retention negative", "retention.ms", "-60000", kerr.InvalidConfig, "at least 1000"},
		{"retention not a number", "retention.ms", "7d", kerr.InvalidConfig, "whole number"},
		{"segment below the floor", "segment.bytes", "1024", kerr.InvalidConfig, "1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.value
			created, err := adm.CreateTopics(ctx, 1, -1, map[string]*string{tc.key: &v}, "fresh")
			if err != nil {
				t.Fatal(err)
			}
			if r := created["fresh"]; !errors.Is(r.Err, tc.want) || !strings.Contains(r.ErrMessage, tc.message) {
				t.Fatalf("CreateTopics: %v %q, want %v with %q", r.Err, r.ErrMessage, tc.want, tc.message)
			}
			for name, alter := range map[string]func() (kadm.AlterConfigsResponses, error){
				"IncrementalAlterConfigs": func() (kadm.AlterConfigsResponses, error) {
					return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.key, Value: &v}}, "kept")
				},
				"AlterConfigs": func() (kadm.AlterConfigsResponses, error) {
					return adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: tc.key, Value: &v}}, "kept")
				},
			} {
				rs, err := alter()
				if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, tc.want) || !strings.Contains(rs[0].ErrMessage, tc.message) {
					t.Fatalf("%s: %v %+v, want %v with %q", name, err, rs, tc.want, tc.message)
				}
			}
			if _, err := a.Key.Topic(ctx, "fresh"); !client.IsCode(err, "topic_not_found") {
				t.Fatalf("a refused CreateTopics left a topic: %v", err)
			}
			if tp, err := a.Key.Topic(ctx, "kept"); err != nil || !maps.Equal(tp.Config, map[string]string{"retention.ms": "3600000"}) {
				t.Fatalf("the topic after refused changes: %+v %v", tp.Config, err)
			}
		})
	}
}
