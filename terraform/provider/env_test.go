package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/terraform/provider"
)

// terraformVersion is the CLI the acceptance tests drive; .ci/tools.d/terraform.sh
// installs it into <repo>/.cache/bin.
const terraformVersion = "1.5.7"

// env is one acceptance test's world: a control plane served in-process on a
// fresh database, with one shared pool, a cell of three brokers, an operator
// key, and a signed-up tenant with an admin API key that the provider uses.
type env struct {
	t        *testing.T
	url      string
	op       *client.Client // operator key
	tenant   *client.Client // the tenant's admin key
	tenantID string
	keyID    string // the tenant's admin key
	secret   string
	opID     string
	opSecret string
}

// newEnv readies Terraform and starts the control plane. Acceptance tests
// skip under -short and fail (not skip) when the Terraform CLI is missing.
func newEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("acceptance test: runs Terraform against a control plane; skipped under -short")
	}
	setupTerraform(t)

	cp := cptest.Start(t, cptest.TestAddrs, func(c *controlplane.Config) { c.Logger = testkit.Logger(t, slog.LevelWarn) })
	ctx := context.Background()
	e := &env{t: t, url: cp.URL, opID: cp.OperatorKeyID, opSecret: cp.OperatorSecret, op: cp.Operator}
	anon := cp.Anon
	res, err := cptest.SignUp(ctx, anon, cp.MailDir, api.SignupRequest{TenantName: "acme", Email: "ops@acme.example", Password: "correct-horse-battery"})
	if err != nil {
		t.Fatalf("signup: %v", err)
	}
	owner := anon.With(client.WithSession(res.Session.Token))
	k, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "terraform", Role: "admin"})
	if err != nil {
		t.Fatalf("create the provider's key: %v", err)
	}
	e.tenantID, e.keyID, e.secret = res.Tenant.ID, k.ID, k.Secret
	e.tenant = anon.With(client.WithAPIKey(k.ID, k.Secret))
	return e
}

// setupTerraform points terraform-plugin-testing at the cached CLI and keeps
// it offline.
func setupTerraform(t *testing.T) {
	t.Helper()
	bin := testkit.CachedTool(t, "terraform")
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=/dev/null")
	out, err := cmd.Output()
	if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != "Terraform v"+terraformVersion {
		t.Fatalf("%s is not Terraform v%s (%q, %v): run `make tools`", bin, terraformVersion, first, err)
	}
	t.Setenv("TF_ACC", "1")
	t.Setenv("TF_ACC_TERRAFORM_PATH", bin)
	t.Setenv("CHECKPOINT_DISABLE", "1")
	t.Setenv("TF_CLI_CONFIG_FILE", "/dev/null")
	// A set TF_ACC_TERRAFORM_VERSION makes the harness download Terraform.
	t.Setenv("TF_ACC_TERRAFORM_VERSION", "")
	os.Unsetenv("TF_ACC_TERRAFORM_VERSION")
}

// factories serves the provider in-process, so `terraform init` installs
// nothing.
func factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"sluice": providerserver.NewProtocol6WithError(provider.New("test")()),
	}
}

// providerHCL configures the default provider with the tenant's admin key.
func (e *env) providerHCL() string {
	return fmt.Sprintf(`
provider "sluice" {
  endpoint       = %q
  api_key_id     = %q
  api_key_secret = %q
}
`, e.url, e.keyID, e.secret)
}

// operatorHCL configures an aliased provider with the operator key.
func (e *env) operatorHCL() string {
	return fmt.Sprintf(`
provider "sluice" {
  alias          = "operator"
  endpoint       = %q
  api_key_id     = %q
  api_key_secret = %q
}
`, e.url, e.opID, e.opSecret)
}

// keyClient authenticates with another key of the tenant.
func (e *env) keyClient(id, secret string) *client.Client {
	return client.New(e.url, client.WithAPIKey(id, secret))
}

func must(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// capture is a check function that saves an attribute's value for later
// steps.
func capture(dst *string) func(string) error {
	return func(v string) error {
		*dst = v
		return nil
	}
}

// noDrift is the plan checks of a step that applies: pre on the plan it
// applies, then an empty plan once it is applied and refreshed.
func noDrift(pre ...plancheck.PlanCheck) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{PreApply: pre, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
}

// noneLeft is a CheckDestroy: list finds nothing once Terraform has
// destroyed what it made.
func noneLeft[T any](what string, list func(context.Context) ([]T, error)) resource.TestCheckFunc {
	return func(*terraform.State) error {
		items, err := list(context.Background())
		if err != nil {
			return err
		}
		if len(items) != 0 {
			return fmt.Errorf("%d %s left after destroy", len(items), what)
		}
		return nil
	}
}
