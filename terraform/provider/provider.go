// Package provider is Sluice's Terraform provider (terraform-plugin-framework):
// the sluice_topic, sluice_api_key, sluice_acl and sluice_quota resources and
// the sluice_topic and sluice_cluster data sources. It owns the mapping
// between Terraform state and the control plane's /v1 API, which it reaches
// only through contract/client; it shares the API's JSON shapes
// (contract/api) and error codes (contract/catalog) and nothing else.
//
// Only terraform/cmd/terraform-provider-sluice and this package's tests
// import it.
package provider

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
)

// Environment variables that stand in for the provider block's attributes,
// the same that tenantd admin reads and tenantd dev prints. The older
// SLUICE_API_URL and SLUICE_API_KEY (id:secret) are read too when these
// are unset (client.ReadEnv).
const (
	EnvEndpoint     = client.EnvEndpoint
	EnvAPIKeyID     = client.EnvAPIKeyID
	EnvAPIKeySecret = client.EnvAPIKeySecret
)

// New returns a constructor of the provider, as providerserver wants it.
// version is reported to Terraform (e.g. "dev" or a release number).
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &sluiceProvider{version: version} }
}

type sluiceProvider struct {
	version string
}

type providerModel struct {
	Endpoint     types.String `tfsdk:"endpoint"`
	APIKeyID     types.String `tfsdk:"api_key_id"`
	APIKeySecret types.String `tfsdk:"api_key_secret"`
}

func (p *sluiceProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sluice"
	resp.Version = p.version
}

func (p *sluiceProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages a Sluice tenant's topics, API keys and ACLs, and (with operator credentials) tenants' quotas, through the control plane's /v1 API.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "Base URL of the control plane API, e.g. https://api.sluice.example. Defaults to $" + EnvEndpoint + " (or the older $" + client.EnvEndpointOld + ").",
			},
			"api_key_id": schema.StringAttribute{
				Optional:    true,
				Description: "Id of the API key to authenticate with. Defaults to $" + EnvAPIKeyID + " (or the id in the older $" + client.EnvAPIKeyOld + ", id:secret).",
			},
			"api_key_secret": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Secret of the API key. Defaults to $" + EnvAPIKeySecret + " (or the secret in the older $" + client.EnvAPIKeyOld + ").",
			},
		},
	}
}

func (p *sluiceProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	cfg, ok := decode[providerModel](ctx, req.Config.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	env, err := client.ReadEnv(os.Getenv)
	if err != nil {
		resp.Diagnostics.AddError("Invalid environment", err.Error())
		return
	}
	setting := func(attr string, v types.String, fromEnv, name string) string {
		if v.IsUnknown() {
			resp.Diagnostics.AddAttributeError(path.Root(attr), "Unknown "+attr,
				"The provider's "+attr+" must be known when Terraform plans; it cannot come from a resource that is not yet created.")
			return ""
		}
		s := v.ValueString()
		if s == "" {
			s = fromEnv
		}
		if s == "" {
			resp.Diagnostics.AddAttributeError(path.Root(attr), "Missing "+attr,
				"Set "+attr+" in the provider block or the "+name+" environment variable.")
		}
		return s
	}
	endpoint := setting("endpoint", cfg.Endpoint, env.Endpoint, EnvEndpoint)
	id := setting("api_key_id", cfg.APIKeyID, env.APIKeyID, EnvAPIKeyID)
	secret := setting("api_key_secret", cfg.APIKeySecret, env.APIKeySecret, EnvAPIKeySecret)
	if resp.Diagnostics.HasError() {
		return
	}
	c := client.New(endpoint, client.WithAPIKey(id, secret))
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *sluiceProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newTopicResource, newAPIKeyResource, newACLResource, newQuotaResource}
}

func (p *sluiceProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newTopicDataSource, newClusterDataSource}
}

// clientFrom takes the client Configure made out of a resource's or data
// source's provider data. Terraform calls Configure on resources before the
// provider is configured too, with nil data; that is not an error.
func clientFrom(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil {
		return nil
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T; this is a bug in the Sluice provider", data))
		return nil
	}
	return c
}

// addAPIError reports a failed call with the catalogue's code and message,
// so that users can look the code up; op names what failed ("create topic").
func addAPIError(diags *diag.Diagnostics, op string, err error) {
	var ce *client.Error
	if errors.As(err, &ce) {
		diags.AddError("Sluice API error: "+ce.Code,
			fmt.Sprintf("%s: %s (code %s, HTTP %d)", op, ce.Message, ce.Code, ce.Status))
		return
	}
	diags.AddError("Sluice API call failed", fmt.Sprintf("%s: %s", op, err))
}

// isGone reports whether err says the object no longer exists, so that Read
// drops it from state and the next plan creates it again.
func isGone(err error) bool {
	return client.IsCode(err, string(catalog.NotFound.Code)) || client.IsCode(err, string(catalog.TopicNotFound.Code))
}
