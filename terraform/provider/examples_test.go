package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestCompleteExample applies terraform/examples/complete as users would,
// so the documented example keeps working.
func TestCompleteExample(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hcl, err := os.ReadFile(filepath.Join("..", "examples", "complete", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	// The example names the provider sluicehq/sluice, as users do; the
	// in-process provider must answer to that address.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "sluicehq")
	t.Setenv("SLUICE_ENDPOINT", e.url)
	t.Setenv("SLUICE_API_KEY_ID", e.keyID)
	t.Setenv("SLUICE_API_KEY_SECRET", e.secret)
	var keyID, secret string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: string(hcl),
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckOutput("bootstrap_servers", "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"),
				resource.TestCheckResourceAttrWith("sluice_api_key.orders_service", "id", capture(&keyID)),
				resource.TestCheckResourceAttrWith("sluice_api_key.orders_service", "secret", capture(&secret)),
				func(*terraform.State) error {
					me, err := e.keyClient(keyID, secret).Me(ctx)
					if err != nil {
						return fmt.Errorf("the example's key does not authenticate: %w", err)
					}
					if me.Role != "client" {
						return fmt.Errorf("the example's key is a %s, want a client", me.Role)
					}
					acls, err := e.tenant.ACLs(ctx)
					if err != nil {
						return err
					}
					if len(acls) != 2 {
						return fmt.Errorf("the example made %d ACLs, want 2", len(acls))
					}
					return nil
				},
			),
			ConfigPlanChecks: noDrift(),
		}},
	})
}
