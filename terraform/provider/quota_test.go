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

// TestQuota: an operator sets a tenant's quotas; fields left unset keep
// their values; destroy leaves the quotas as set.
func TestQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const addr = "sluice_quota.acme"
	cfg := func(provider string, maxTopics int, extra string) string {
		return e.providerHCL() + e.operatorHCL() + fmt.Sprintf(`
resource "sluice_quota" "acme" {
  provider       = %s
  tenant_id      = %q
  max_topics     = %d
  max_partitions = 60
  %s
}
`, provider, e.tenantID, maxTopics, extra)
	}
	// tenantSees checks the quotas as the tenant reads them.
	tenantSees := func(maxTopics, maxPartitions int, fetchBytes int64) resource.TestCheckFunc {
		return func(*terraform.State) error {
			q, err := e.tenant.Quotas(ctx)
			if err != nil {
				return err
			}
			if q.MaxTopics != maxTopics || q.MaxPartitions != maxPartitions || q.FetchBytesPerSec != fetchBytes {
				return fmt.Errorf("tenant has max_topics %d, max_partitions %d, fetch_bytes_per_sec %d; want %d, %d, %d",
					q.MaxTopics, q.MaxPartitions, q.FetchBytesPerSec, maxTopics, maxPartitions, fetchBytes)
			}
			return nil
		}
	}
	const freeFetch = 2 << 20 // the free plan's fetch_bytes_per_sec

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		// Destroy only forgets the quotas: the last ones applied stay.
		CheckDestroy: tenantSees(25, 60, 4<<20),
		Steps: []resource.TestStep{
			{
				// A tenant's own key may not set quotas.
				Config:      cfg("sluice", 20, ""),
				ExpectError: regexp.MustCompile(`permission_denied`),
			},
			{
				Config: cfg("sluice.operator", 20, ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", e.tenantID),
					resource.TestCheckResourceAttr(addr, "max_topics", "20"),
					resource.TestCheckResourceAttr(addr, "fetch_bytes_per_sec", fmt.Sprint(freeFetch)),
					resource.TestCheckResourceAttr(addr, "max_message_bytes", fmt.Sprint(1<<20)),
					tenantSees(20, 60, freeFetch),
				),
				ConfigPlanChecks: noDrift(),
			},
			{
				Config:           cfg("sluice.operator", 25, "fetch_bytes_per_sec = 4194304"),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)),
				Check:            tenantSees(25, 60, 4<<20),
			},
			{
				Config:            cfg("sluice.operator", 25, "fetch_bytes_per_sec = 4194304"),
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     e.tenantID,
				ImportStateVerify: true,
			},
			{
				// Changed behind Terraform's back: a managed quota is set back,
				// one left out of the configuration keeps its new value.
				PreConfig: func() {
					q, err := e.op.AdminQuotas(ctx, e.tenantID)
					if err != nil {
						t.Fatal(err)
					}
					q.MaxTopics, q.MaxConnections = 99, 77
					if _, err := e.op.AdminSetQuotas(ctx, e.tenantID, q); err != nil {
						t.Fatal(err)
					}
				},
				Config:           cfg("sluice.operator", 25, "fetch_bytes_per_sec = 4194304"),
				ConfigPlanChecks: noDrift(plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "max_topics", "25"),
					resource.TestCheckResourceAttr(addr, "max_connections", "77"),
					tenantSees(25, 60, 4<<20),
				),
			},
			{
				// Rejected by the API; the last applied quotas stay.
				Config:      cfg("sluice.operator", 0, "fetch_bytes_per_sec = 4194304"),
				ExpectError: regexp.MustCompile(`(?s)invalid_request.*max_topics must be greater than 0`),
			},
		},
	})
}
