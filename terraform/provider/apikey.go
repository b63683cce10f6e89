package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/api"
)

// apiKeyModel is sluice_api_key's state.
type apiKeyModel struct {
	ID          types.String `tfsdk:"id"`
	Description types.String `tfsdk:"description"`
	Role        types.String `tfsdk:"role"`
	ExpiresAt   types.String `tfsdk:"expires_at"`
	Secret      types.String `tfsdk:"secret"`
	Status      types.String `tfsdk:"status"`
	CreatedAt   types.String `tfsdk:"created_at"`
}

// fill copies a key from the API into m. The secret is left alone: the API
// shows it once, at create. expires_at keeps the user's spelling when it
// names the same instant as the API's.
func (m *apiKeyModel) fill(k api.APIKey) {
	m.ID = types.StringValue(k.ID)
	m.Description = types.StringValue(k.Description)
	m.Role = types.StringValue(k.Role)
	m.Status = types.StringValue(k.Status)
	m.CreatedAt = types.StringValue(k.CreatedAt.UTC().Format(time.RFC3339))
	switch {
	case k.ExpiresAt == nil:
		m.ExpiresAt = types.StringNull()
	case !m.ExpiresAt.IsNull() && !m.ExpiresAt.IsUnknown():
		if t, err := time.Parse(time.RFC3339, m.ExpiresAt.ValueString()); err == nil && t.Equal(*k.ExpiresAt) {
			break
		}
		fallthrough
	default:
		m.ExpiresAt = types.StringValue(k.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
}

type apiKeyResource struct {
	resourceBase
	replaceOnly
}

var (
	_ resource.ResourceWithConfigure      = (*apiKeyResource)(nil)
	_ resource.ResourceWithImportState    = (*apiKeyResource)(nil)
	_ resource.ResourceWithValidateConfig = (*apiKeyResource)(nil)
)

func newAPIKeyResource() resource.Resource {
	return &apiKeyResource{resourceBase{suffix: "_api_key", importBy: "id"}, replaceOnly{what: "API keys", typ: "sluice_api_key"}}
}

func (r *apiKeyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "An API key of the tenant. Keys cannot be changed: any change creates a new key and revokes the old one. " +
			"Use lifecycle { create_before_destroy = true } to rotate without downtime.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:    true,
				Description: "The key's id: the SASL username of Kafka clients and the principal of ACLs.",
			},
			"description": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				Description:   "What the key is for (at most 256 characters).",
				PlanModifiers: replace,
			},
			"role": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("developer"),
				Description:   "admin, developer (default), viewer or client (data plane only, limited to what ACLs allow). At most the role of the provider's own key.",
				PlanModifiers: replace,
			},
			"expires_at": schema.StringAttribute{
				Optional:      true,
				Description:   "When the key stops working, as an RFC 3339 timestamp in the future; unset means never.",
				PlanModifiers: replace,
			},
			"secret": schema.StringAttribute{
				Computed:    true,
				Sensitive:   true,
				Description: "The key's secret. Known only to the state of the apply that created the key; it is null after import.",
			},
			"status": schema.StringAttribute{
				Computed:    true,
				Description: "active or expired. A key revoked outside Terraform leaves the state, and the next apply creates a new one.",
			},
			"created_at": schema.StringAttribute{Computed: true, Description: "When the key was created (RFC 3339)."},
		},
	}
}

func (r *apiKeyResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var exp types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("expires_at"), &exp)...)
	if exp.IsNull() || exp.IsUnknown() {
		return
	}
	if _, err := time.Parse(time.RFC3339, exp.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "Invalid expires_at",
			fmt.Sprintf("%q is not an RFC 3339 timestamp such as 2030-01-02T15:04:05Z", exp.ValueString()))
	}
}

func (r *apiKeyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[apiKeyModel](ctx, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	in := api.CreateAPIKeyRequest{Description: plan.Description.ValueString(), Role: plan.Role.ValueString()}
	if !plan.ExpiresAt.IsNull() {
		t, err := time.Parse(time.RFC3339, plan.ExpiresAt.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("expires_at"), "Invalid expires_at", err.Error())
			return
		}
		in.ExpiresAt = &t
	}
	k, err := r.c.CreateAPIKey(ctx, in)
	if err != nil {
		addAPIError(&resp.Diagnostics, "create api key", err)
		return
	}
	plan.fill(k)
	plan.Secret = types.StringValue(k.Secret)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *apiKeyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[apiKeyModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	k, err := r.c.APIKey(ctx, state.ID.ValueString())
	// A revoked key never works again: treat it as gone so that the next
	// plan creates a replacement.
	if err == nil && k.Status == "revoked" {
		resp.State.RemoveResource(ctx)
		return
	}
	if readFailed(ctx, resp, "read api key "+state.ID.ValueString(), err) {
		return
	}
	state.fill(k)
	if state.Secret.IsUnknown() {
		state.Secret = types.StringNull()
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Delete revokes the key.
func (r *apiKeyResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[apiKeyModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	_, err := r.c.RevokeAPIKey(ctx, state.ID.ValueString())
	deleteFailed(&resp.Diagnostics, "revoke api key "+state.ID.ValueString(), err)
}
