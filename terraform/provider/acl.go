package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/api"
)

// aclModel is sluice_acl's state.
type aclModel struct {
	ID           types.String `tfsdk:"id"`
	Principal    types.String `tfsdk:"principal"`
	ResourceType types.String `tfsdk:"resource_type"`
	ResourceName types.String `tfsdk:"resource_name"`
	PatternType  types.String `tfsdk:"pattern_type"`
	Operation    types.String `tfsdk:"operation"`
	Permission   types.String `tfsdk:"permission"`
}

func (m *aclModel) fill(a api.ACL) {
	m.ID = types.StringValue(a.ID)
	m.Principal = types.StringValue(a.Principal)
	m.ResourceType = types.StringValue(a.ResourceType)
	m.ResourceName = types.StringValue(a.ResourceName)
	m.PatternType = types.StringValue(a.PatternType)
	m.Operation = types.StringValue(a.Operation)
	m.Permission = types.StringValue(a.Permission)
}

type aclResource struct {
	resourceBase
	replaceOnly
}

var (
	_ resource.ResourceWithConfigure   = (*aclResource)(nil)
	_ resource.ResourceWithImportState = (*aclResource)(nil)
)

func newACLResource() resource.Resource {
	return &aclResource{resourceBase{suffix: "_acl", importBy: "id"}, replaceOnly{what: "ACLs", typ: "sluice_acl"}}
}

func (r *aclResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "Allows or denies one API key (or every key of the tenant) an operation on topics, consumer groups or the cluster. " +
			"ACLs cannot be changed: any change replaces the ACL.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The ACL's id."},
			"principal": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Description: `Id of one of the tenant's API keys, or "*" for all of them.`,
			},
			"resource_type": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Description: "topic, group or cluster.",
			},
			"resource_name": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Description: `Name (or prefix, with pattern_type "prefixed") of the resource; "*" matches every name.`,
			},
			"pattern_type": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("literal"), PlanModifiers: replace,
				Description: "literal (default) or prefixed.",
			},
			"operation": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Description: "all, read, write, create, delete, describe, alter, describe_configs or alter_configs.",
			},
			"permission": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("allow"), PlanModifiers: replace,
				Description: "allow (default) or deny. A deny wins over any allow.",
			},
		},
	}
}

func (r *aclResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[aclModel](ctx, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	a, err := r.c.CreateACL(ctx, api.CreateACLRequest{
		Principal:    plan.Principal.ValueString(),
		ResourceType: plan.ResourceType.ValueString(),
		ResourceName: plan.ResourceName.ValueString(),
		PatternType:  plan.PatternType.ValueString(),
		Operation:    plan.Operation.ValueString(),
		Permission:   plan.Permission.ValueString(),
	})
	if err != nil {
		addAPIError(&resp.Diagnostics, "create acl", err)
		return
	}
	plan.fill(a)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *aclResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[aclModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	a, err := r.c.ACL(ctx, state.ID.ValueString())
	if readFailed(ctx, resp, "read acl "+state.ID.ValueString(), err) {
		return
	}
	state.fill(a)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *aclResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[aclModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	deleteFailed(&resp.Diagnostics, "delete acl "+state.ID.ValueString(), r.c.DeleteACL(ctx, state.ID.ValueString()))
}
