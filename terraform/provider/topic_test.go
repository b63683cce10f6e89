package provider_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// TestTopic walks a topic through its life: create, no drift, grow in place,
// change config, import, shrink (refused at plan), deletion out of band,
// rename (replace), destroy.
func TestTopic(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const addr = "sluice_topic.orders"
	cfg := func(name string, partitions int, config string) string {
		return e.providerHCL() + fmt.Sprintf(`
resource "sluice_topic" "orders" {
  name       = %q
  partitions = %d
  config     = %s
}
`, name, partitions, config)
	}
	// apiHas checks the topic as the API sees it.
	apiHas := func(name string, partitions int, config map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			tp, err := e.tenant.Topic(ctx, name)
			if err != nil {
				return err
			}
			if tp.Partitions != partitions || !maps.Equal(tp.Config, config) {
				return fmt.Errorf("API has %d partitions and config %v; want %d and %v", tp.Partitions, tp.Config, partitions, config)
			}
			return nil
		}
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy:             noneLeft("topics", e.tenant.Topics),
		Steps: []resource.TestStep{
			{
				// The catalogue's code and message reach the user.
				Config:      cfg("orders", 2, `{ "cleanup.policy" = "shred" }`),
				ExpectError: regexp.MustCompile(`(?s)invalid_config.*must be "delete", "compact" or "compact,delete"`),
			},
			{
				Config: cfg("orders", 2, `{ "retention.ms" = "3600000" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", "orders"),
					resource.TestCheckResourceAttr(addr, "partitions", "2"),
					resource.TestCheckResourceAttr(addr, "config.%", "1"),
					resource.TestCheckResourceAttr(addr, "config.retention.ms", "3600000"),
					resource.TestCheckResourceAttr(addr, "effective_config.retention.ms", "3600000"),
					resource.TestCheckResourceAttr(addr, "effective_config.cleanup.policy", "delete"),
					resource.TestCheckResourceAttr(addr, "replication_factor", "3"),
					apiHas("orders", 2, map[string]string{"retention.ms": "3600000"}),
				),
				ConfigPlanChecks: noDrift(),
			},
			{
				// More partitions and another key: an update in place.
				Config:           cfg("orders", 4, `{ "retention.ms" = "7200000", "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "partitions", "4"),
					resource.TestCheckResourceAttr(addr, "config.%", "2"),
					apiHas("orders", 4, map[string]string{"retention.ms": "7200000", "max.message.bytes": "524288"}),
				),
			},
			{
				// A key dropped from config returns to the default.
				Config:           cfg("orders", 4, `{ "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "config.%", "1"),
					resource.TestCheckResourceAttr(addr, "effective_config.retention.ms", "604800000"),
					apiHas("orders", 4, map[string]string{"max.message.bytes": "524288"}),
				),
			},
			{
				Config:            cfg("orders", 4, `{ "max.message.bytes" = "524288" }`),
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     "orders",
				ImportStateVerify: true,
			},
			{
				// Fewer partitions: the plan fails and the topic stays
				// (TestTopicPartitionsNeverShrink has the details).
				Config:      cfg("orders", 3, `{ "max.message.bytes" = "524288" }`),
				ExpectError: regexp.MustCompile(`partitions cannot be lowered from 4 to 3`),
			},
			{
				// Deleted behind Terraform's back: the next apply recreates it.
				PreConfig: func() {
					if err := e.tenant.DeleteTopic(ctx, "orders"); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("orders", 3, `{ "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: apiHas("orders", 3, map[string]string{"max.message.bytes": "524288"}),
			},
			{
				// A new name is a new topic; no config is null, not {}.
				Config: e.providerHCL() + `
resource "sluice_topic" "orders" {
  name = "orders-v2"
}
`,
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "partitions", "1"),
					resource.TestCheckNoResourceAttr(addr, "config.%"),
					apiHas("orders-v2", 1, map[string]string{}),
					func(*terraform.State) error {
						if _, err := e.tenant.Topic(ctx, "orders"); !client.IsCode(err, "topic_not_found") {
							return errors.Join(errors.New("the renamed topic's old name still exists"), err)
						}
						return nil
					},
				),
			},
			{
				// An explicitly empty config map stays empty, without a diff.
				Config: e.providerHCL() + `
resource "sluice_topic" "orders" {
  name   = "orders-v2"
  config = {}
}
`,
				ConfigPlanChecks: noDrift(),
			},
		},
	})
}

// TestDataSources reads a topic and the tenant's cluster, with the
// provider configured from the environment alone.
func TestDataSources(t *testing.T) {
	e := newEnv(t)
	t.Setenv("SLUICE_ENDPOINT", e.url)
	t.Setenv("SLUICE_API_KEY_ID", e.keyID)
	t.Setenv("SLUICE_API_KEY_SECRET", e.secret)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: `
resource "sluice_topic" "events" {
  name       = "events"
  partitions = 3
  config     = { "retention.ms" = "86400000" }
}

data "sluice_topic" "events" {
  name = sluice_topic.events.name
}

data "sluice_cluster" "this" {}
`,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("data.sluice_topic.events", "partitions", "3"),
				resource.TestCheckResourceAttr("data.sluice_topic.events", "replication_factor", "3"),
				resource.TestCheckResourceAttr("data.sluice_topic.events", "config.retention.ms", "86400000"),
				resource.TestCheckResourceAttr("data.sluice_topic.events", "effective_config.cleanup.policy", "delete"),
				resource.TestCheckResourceAttr("data.sluice_cluster.this", "tenant_id", e.tenantID),
				resource.TestCheckResourceAttr("data.sluice_cluster.this", "cell_id", "cell-1"),
				resource.TestCheckResourceAttr("data.sluice_cluster.this", "bootstrap_servers.#", "3"),
				resource.TestCheckResourceAttr("data.sluice_cluster.this", "bootstrap_servers.0", "127.0.0.1:19092"),
				resource.TestCheckResourceAttr("data.sluice_cluster.this", "http_endpoints.2", "http://127.0.0.1:18094"),
			),
		}, {
			Config: `
data "sluice_topic" "missing" {
  name = "no-such-topic"
}
`,
			ExpectError: regexp.MustCompile(`topic_not_found`),
		}},
	})
}

// TestProviderOlderEnv: the names tenantd dev used to print, with the key
// as id:secret, still configure the provider.
func TestProviderOlderEnv(t *testing.T) {
	e := newEnv(t)
	for _, v := range []string{"SLUICE_ENDPOINT", "SLUICE_API_KEY_ID", "SLUICE_API_KEY_SECRET"} {
		t.Setenv(v, "")
	}
	t.Setenv("SLUICE_API_URL", e.url)
	t.Setenv("SLUICE_API_KEY", e.keyID+":"+e.secret)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: `data "sluice_cluster" "this" {}`,
			Check:  resource.TestCheckResourceAttr("data.sluice_cluster.this", "tenant_id", e.tenantID),
		}},
	})
}

// TestProviderConfigMissing: without settings or environment the provider
// says what to set.
func TestProviderConfigMissing(t *testing.T) {
	newEnv(t)
	for _, v := range []string{"SLUICE_ENDPOINT", "SLUICE_API_KEY_ID", "SLUICE_API_KEY_SECRET", "SLUICE_API_URL", "SLUICE_API_KEY"} {
		t.Setenv(v, "")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config:      `data "sluice_cluster" "this" {}`,
			ExpectError: regexp.MustCompile(`(?s)Missing endpoint.*SLUICE_ENDPOINT`),
		}},
	})
}

// topicHCL is a provider block and one sluice_topic "t" with the given
// body.
func (e *env) topicHCL(body string) string {
	return e.providerHCL() + "\nresource \"sluice_topic\" \"t\" {\n" + body + "\n}\n"
}

// sameTopic checks that the API's topic is the one first seen (same
// creation time and placement, so the same records) with the given count.
func (e *env) sameTopic(name string, first *api.Topic, partitions int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		tp, err := e.tenant.Topic(context.Background(), name)
		if err != nil {
			return fmt.Errorf("the topic is gone: %w", err)
		}
		if first.Name == "" {
			*first = tp
		}
		if !tp.CreatedAt.Equal(first.CreatedAt) {
			return fmt.Errorf("topic %s was created again at %s (first at %s): its records are lost", name, tp.CreatedAt, first.CreatedAt)
		}
		if tp.Partitions != partitions || !slices.EqualFunc(tp.Assignments[:len(first.Assignments)], first.Assignments,
			func(a, b api.Partition) bool {
				return a.Partition == b.Partition && slices.Equal(a.Replicas, b.Replicas)
			}) {
			return fmt.Errorf("topic %s has %d partitions placed %v; want %d, the first %d placed %v",
				name, tp.Partitions, tp.Assignments, partitions, len(first.Assignments), first.Assignments)
		}
		if !maps.Equal(tp.Config, map[string]string{"retention.ms": "3600000"}) {
			return fmt.Errorf("topic %s has config %v", name, tp.Config)
		}
		return nil
	}
}

// TestTopicPartitionsNeverShrink: a configuration with fewer partitions
// than the topic fails the plan, naming the problem, and the topic (the
// same one, with its records) is untouched; a replacement is never planned.
func TestTopicPartitionsNeverShrink(t *testing.T) {
	e := newEnv(t)
	var first api.Topic
	cfg := func(partitions int) string {
		return e.topicHCL(fmt.Sprintf(`  name       = "orders"
  partitions = %d
  config     = { "retention.ms" = "3600000" }`, partitions))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{Config: cfg(6), Check: e.sameTopic("orders", &first, 6)},
			{
				Config:      cfg(4),
				ExpectError: regexp.MustCompile(`(?s)Partitions cannot be lowered.*partitions cannot be lowered from 6 to 4: Kafka partitions only\s+grow`),
			},
			{
				// Nothing was applied: the topic is the same and the
				// configuration it had still plans nothing.
				Config:           cfg(6),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            resource.ComposeAggregateTestCheckFunc(e.sameTopic("orders", &first, 6), resource.TestCheckResourceAttr("sluice_topic.t", "partitions", "6")),
			},
		},
	})
}

// TestTopicPartitionsRaisedOutside: partitions raised outside Terraform
// (here a PATCH of the /v1 API, as the console or kafka-topics --alter do)
// are kept: the next plan is empty (with a warning, see
// TestPlanPartitions), the apply keeps the live count in the state, growing
// past it is an update in place, and lowering the configuration below what
// Terraform applied is an error.
func TestTopicPartitionsRaisedOutside(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var first api.Topic
	cfg := func(partitions int) string {
		return e.topicHCL(fmt.Sprintf(`  name       = "orders"
  partitions = %d
  config     = { "retention.ms" = "3600000" }`, partitions))
	}
	const addr = "sluice_topic.t"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{Config: cfg(4), Check: e.sameTopic("orders", &first, 4)},
			{
				PreConfig: func() {
					n := 8
					if _, err := e.tenant.UpdateTopic(ctx, "orders", api.UpdateTopicRequest{Partitions: &n}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           cfg(4),
				ConfigPlanChecks: noDrift(plancheck.ExpectEmptyPlan()),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "partitions", "8"),
					e.sameTopic("orders", &first, 8),
				),
			},
			{
				// Catching up with the live count changes nothing.
				Config:           cfg(8),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            e.sameTopic("orders", &first, 8),
			},
			{
				Config:           cfg(10),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "partitions", "10"),
					e.sameTopic("orders", &first, 10),
				),
			},
			{
				Config:      cfg(6),
				ExpectError: regexp.MustCompile(`partitions cannot be lowered from 10 to 6`),
			},
			{
				Config:           cfg(10),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            e.sameTopic("orders", &first, 10),
			},
		},
	})
}

// TestTopicPlanTimeErrors: what the control plane would refuse fails the
// plan, with the catalogue's code and message, and nothing is created.
func TestTopicPlanTimeErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, body string
		err        string
	}{
		{"bad name", `name = "bad name!"`, `(?s)Invalid topic name \(invalid_name\).*a topic name has 1 to 249 characters`},
		{"reserved name", `name = "__offsets"`, `(?s)invalid_name.*topic names starting with "__" are\s+reserved`},
		{"no partitions", "name = \"t\"\npartitions = 0", `(?s)Invalid partition count \(invalid_partitions\).*partitions must be at least 1`},
		{"more partitions than the tenant may have", "name = \"t\"\npartitions = 500", `(?s)invalid_partitions.*partitions must be from 1 to 30`},
		{"unknown config key", `name = "t"` + "\n" + `config = { "retention.hours" = "1" }`, `(?s)Invalid topic config \(invalid_config\).*unknown topic config\s+"retention.hours"`},
		{"config value out of bounds", `name = "t"` + "\n" + `config = { "segment.bytes" = "1024" }`, `(?s)invalid_config.*segment.bytes="1024": must be from 1 MiB`},
		{"config value above the tenant's quota", `name = "t"` + "\n" + `config = { "retention.ms" = "2592000000" }`, `(?s)quota_exceeded.*retention.ms=2592000000 is above the\s+tenant's limit`},
		{"retention forever", `name = "t"` + "\n" + `config = { "retention.ms" = "-1" }`, `(?s)invalid_config.*retention.ms="-1": -1 \(keep forever\) is\s+not\s+offered`},
		{"negative retention", `name = "t"` + "\n" + `config = { "retention.ms" = "-60000" }`, `(?s)invalid_config.*retention.ms="-60000": must be at\s+least\s+1000`},
		{"retention not a number", `name = "t"` + "\n" + `config = { "retention.bytes" = "10GB" }`, `(?s)invalid_config.*retention.bytes="10GB": must be a\s+whole\s+number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{
					Config:      e.topicHCL(tc.body),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(tc.err),
				}},
			})
			ts, err := e.tenant.Topics(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 0 {
				t.Errorf("%d topics exist after a failed plan", len(ts))
			}
		})
	}
}
