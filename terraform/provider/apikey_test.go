package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sluicehq/sluice/contract/client"
)

// TestAPIKey: create, no drift, replace on change (the old key revoked),
// import, revocation out of band, destroy (revoke).
func TestAPIKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const addr = "sluice_api_key.ci"
	cfg := func(role, expires string) string {
		return e.providerHCL() + fmt.Sprintf(`
resource "sluice_api_key" "ci" {
  description = "ci pipeline"
  role        = %q
  expires_at  = %s
}
`, role, expires)
	}
	var id1, secret1, id2, secret2 string
	// works checks that a key authenticates, with the role it should have.
	works := func(id, secret *string, role string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			me, err := e.keyClient(*id, *secret).Me(ctx)
			if err != nil {
				return fmt.Errorf("key %s does not authenticate: %w", *id, err)
			}
			if me.Role != role || me.TenantID != e.tenantID {
				return fmt.Errorf("key %s is a %s of %s; want a %s of %s", *id, me.Role, me.TenantID, role, e.tenantID)
			}
			return nil
		}
	}
	revoked := func(id, secret *string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			if _, err := e.keyClient(*id, *secret).Me(ctx); !client.IsCode(err, "key_revoked") {
				return fmt.Errorf("key %s: got %v, want key_revoked", *id, err)
			}
			return nil
		}
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			keys, err := e.tenant.APIKeys(ctx)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if k.ID != e.keyID && k.Status != "revoked" {
					return fmt.Errorf("key %s is %s after destroy", k.ID, k.Status)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// Caught at plan time, before any call.
				Config:      cfg("viewer", `"next tuesday"`),
				ExpectError: regexp.MustCompile(`Invalid expires_at`),
			},
			{
				// A role no key may hold: the API's code reaches the user.
				Config:      cfg("owner", "null"),
				ExpectError: regexp.MustCompile(`invalid_request`),
			},
			{
				Config: cfg("developer", `"2099-01-02T03:04:05Z"`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", capture(&id1)),
					resource.TestCheckResourceAttrWith(addr, "secret", capture(&secret1)),
					resource.TestCheckResourceAttr(addr, "status", "active"),
					resource.TestCheckResourceAttr(addr, "role", "developer"),
					resource.TestCheckResourceAttr(addr, "expires_at", "2099-01-02T03:04:05Z"),
					resource.TestCheckResourceAttrSet(addr, "created_at"),
					works(&id1, &secret1, "developer"),
				),
				ConfigPlanChecks: noDrift(),
			},
			{
				// Keys cannot change: a new one replaces the old, which is revoked.
				Config:           cfg("viewer", "null"),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", capture(&id2)),
					resource.TestCheckResourceAttrWith(addr, "secret", capture(&secret2)),
					resource.TestCheckNoResourceAttr(addr, "expires_at"),
					works(&id2, &secret2, "viewer"),
					revoked(&id1, &secret1),
				),
			},
			{
				Config:                  cfg("viewer", "null"),
				ResourceName:            addr,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret"},
			},
			{
				// Revoked behind Terraform's back: the next apply makes a new key.
				PreConfig: func() {
					if _, err := e.tenant.RevokeAPIKey(ctx, id2); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("viewer", "null"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", func(v string) error {
						if v == id2 {
							return fmt.Errorf("the revoked key %s is still in state", v)
						}
						return nil
					}),
					resource.TestCheckResourceAttr(addr, "status", "active"),
				),
			},
		},
	})
}

// TestAPIKeyRotation: with create_before_destroy the replacement key exists
// before the old one is revoked, so clients can move over without downtime.
func TestAPIKeyRotation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const addr = "sluice_api_key.app"
	cfg := func(generation int) string {
		return e.providerHCL() + fmt.Sprintf(`
resource "sluice_api_key" "app" {
  description = "app, generation %d"
  role        = "client"

  lifecycle {
    create_before_destroy = true
  }
}

# An ACL on the key follows it to the new key; it too is created before the
# old one goes, so the old key keeps its rights until it is revoked.
resource "sluice_acl" "app_read" {
  principal     = sluice_api_key.app.id
  resource_type = "topic"
  resource_name = "orders"
  operation     = "read"

  lifecycle {
    create_before_destroy = true
  }
}
`, generation)
	}
	var oldID, oldSecret, newID, newSecret string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: cfg(1),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", capture(&oldID)),
					resource.TestCheckResourceAttrWith(addr, "secret", capture(&oldSecret)),
				),
			},
			{
				Config: cfg(2),
				ConfigPlanChecks: noDrift(
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreateBeforeDestroy),
					plancheck.ExpectResourceAction("sluice_acl.app_read", plancheck.ResourceActionCreateBeforeDestroy),
				),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrWith(addr, "id", capture(&newID)),
					resource.TestCheckResourceAttrWith(addr, "secret", capture(&newSecret)),
					resource.TestCheckResourceAttrPair("sluice_acl.app_read", "principal", addr, "id"),
					func(*terraform.State) error {
						if newID == oldID {
							return fmt.Errorf("the key was not replaced")
						}
						if _, err := e.keyClient(newID, newSecret).Me(ctx); err != nil {
							return fmt.Errorf("the new key does not authenticate: %w", err)
						}
						if _, err := e.keyClient(oldID, oldSecret).Me(ctx); !client.IsCode(err, "key_revoked") {
							return fmt.Errorf("the old key: got %v, want key_revoked", err)
						}
						// Both keys were valid from the new one's creation to
						// the old one's revocation.
						oldKey, err := e.tenant.APIKey(ctx, oldID)
						if err != nil {
							return err
						}
						newKey, err := e.tenant.APIKey(ctx, newID)
						if err != nil {
							return err
						}
						if oldKey.RevokedAt == nil || oldKey.RevokedAt.Before(newKey.CreatedAt) {
							return fmt.Errorf("old key revoked at %v, new key created at %v: no overlap", oldKey.RevokedAt, newKey.CreatedAt)
						}
						acls, err := e.tenant.ACLs(ctx)
						if err != nil {
							return err
						}
						if len(acls) != 1 || acls[0].Principal != newID {
							return fmt.Errorf("ACLs after rotation: %+v; want one for %s", acls, newID)
						}
						return nil
					},
				),
			},
		},
	})
}
