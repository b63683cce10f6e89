package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestACL: create, no drift, replace on change, import, deletion out of
// band, destroy.
func TestACL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const addr = "sluice_acl.orders"
	cfg := func(resourceType, operation, extra string) string {
		return e.providerHCL() + fmt.Sprintf(`
resource "sluice_api_key" "app" {
  description = "orders service"
  role        = "client"
}

resource "sluice_acl" "orders" {
  principal     = sluice_api_key.app.id
  resource_type = %q
  resource_name = "orders"
  operation     = %q
  %s
}
`, resourceType, operation, extra)
	}
	var aclID string
	// apiHas checks the tenant's one ACL as the API sees it.
	apiHas := func(operation, pattern, permission string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			acls, err := e.tenant.ACLs(ctx)
			if err != nil {
				return err
			}
			if len(acls) != 1 || acls[0].Operation != operation || acls[0].PatternType != pattern || acls[0].Permission != permission {
				return fmt.Errorf("API has ACLs %+v; want one %s %s %s", acls, permission, operation, pattern)
			}
			return nil
		}
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy:             noneLeft("ACLs", e.tenant.ACLs),
		Steps: []resource.TestStep{
			{
				Config:      cfg("queue", "read", ""),
				ExpectError: regexp.MustCompile(`(?s)invalid_request.*resource_type must be one of`),
			},
			{
				Config: cfg("topic", "read", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", capture(&aclID)),
					resource.TestCheckResourceAttrPair(addr, "principal", "sluice_api_key.app", "id"),
					resource.TestCheckResourceAttr(addr, "pattern_type", "literal"),
					resource.TestCheckResourceAttr(addr, "permission", "allow"),
					apiHas("read", "literal", "allow"),
				),
				ConfigPlanChecks: noDrift(),
			},
			{
				// ACLs cannot change: any change replaces one.
				Config: cfg("topic", "write", `pattern_type = "prefixed"
  permission   = "deny"`),
				ConfigPlanChecks: noDrift(
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectResourceAction("sluice_api_key.app", plancheck.ResourceActionNoop),
				),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", func(v string) error {
						if v == aclID {
							return fmt.Errorf("ACL %s was not replaced", v)
						}
						aclID = v
						return nil
					}),
					apiHas("write", "prefixed", "deny"),
				),
			},
			{
				Config: cfg("topic", "write", `pattern_type = "prefixed"
  permission   = "deny"`),
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// Deleted behind Terraform's back: the next apply recreates it.
				PreConfig: func() {
					if err := e.tenant.DeleteACL(ctx, aclID); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("topic", "write", `pattern_type = "prefixed"
  permission   = "deny"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: apiHas("write", "prefixed", "deny"),
			},
		},
	})
}
