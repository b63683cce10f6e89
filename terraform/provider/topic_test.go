package provider_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sluicehq/sluice/controlplane/client"
)

// TestTopic walks a topic through its life: create, no drift, grow in place,
// change config, import, shrink (replace), deletion out of band, rename
// (replace), destroy.
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
	empty := plancheck.ExpectEmptyPlan()

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			ts, err := e.tenant.Topics(ctx)
			if err != nil {
				return err
			}
			if len(ts) != 0 {
				return fmt.Errorf("%d topics left after destroy", len(ts))
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// The catalogue's code and message reach the user.
				Config:      cfg("orders", 2, `{ "cleanup.policy" = "compact" }`),
				ExpectError: regexp.MustCompile(`(?s)invalid_config.*compaction is not supported`),
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
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{empty}},
			},
			{
				// More partitions and another key: an update in place.
				Config: cfg("orders", 4, `{ "retention.ms" = "7200000", "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{empty},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "partitions", "4"),
					resource.TestCheckResourceAttr(addr, "config.%", "2"),
					apiHas("orders", 4, map[string]string{"retention.ms": "7200000", "max.message.bytes": "524288"}),
				),
			},
			{
				// A key dropped from config returns to the default.
				Config: cfg("orders", 4, `{ "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{empty},
				},
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
				// Fewer partitions: the topic is replaced.
				Config: cfg("orders", 3, `{ "max.message.bytes" = "524288" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{empty},
				},
				Check: apiHas("orders", 3, map[string]string{"max.message.bytes": "524288"}),
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
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
					PostApplyPostRefresh: []plancheck.PlanCheck{empty},
				},
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
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{empty}},
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

// TestProviderConfigMissing: without settings or environment the provider
// says what to set.
func TestProviderConfigMissing(t *testing.T) {
	newEnv(t)
	for _, v := range []string{"SLUICE_ENDPOINT", "SLUICE_API_KEY_ID", "SLUICE_API_KEY_SECRET"} {
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
