package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/controlplane/api"
	"github.com/sluicehq/sluice/controlplane/client"
)

// topicModel is sluice_topic's state, and the data source's.
type topicModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	Partitions        types.Int64  `tfsdk:"partitions"`
	Config            types.Map    `tfsdk:"config"`
	ReplicationFactor types.Int64  `tfsdk:"replication_factor"`
	EffectiveConfig   types.Map    `tfsdk:"effective_config"`
}

// fill copies a topic from the API into m. The API's config holds only the
// keys set explicitly, which is what the user's config map holds too; an
// empty one stays as the user wrote it (null or {}) so neither diffs.
func (m *topicModel) fill(ctx context.Context, t api.Topic, diags *diag.Diagnostics) {
	m.ID = types.StringValue(t.Name)
	m.Name = types.StringValue(t.Name)
	m.Partitions = types.Int64Value(int64(t.Partitions))
	m.ReplicationFactor = types.Int64Value(int64(t.ReplicationFactor))
	if len(t.Config) > 0 || m.Config.IsNull() || m.Config.IsUnknown() {
		m.Config = stringMap(ctx, t.Config, diags)
	} else {
		m.Config = emptyMap()
	}
	eff := stringMap(ctx, t.EffectiveConfig, diags)
	if eff.IsNull() {
		eff = emptyMap()
	}
	m.EffectiveConfig = eff
}

// emptyMap is a known map attribute with no elements, as opposed to null.
func emptyMap() types.Map { return types.MapValueMust(types.StringType, map[string]attr.Value{}) }

// stringMap is a map attribute of m, null when m is empty.
func stringMap(ctx context.Context, m map[string]string, diags *diag.Diagnostics) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	v, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return v
}

// goStringMap reads a map attribute; null and unknown read as empty.
func goStringMap(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]string {
	out := map[string]string{}
	if v.IsNull() || v.IsUnknown() {
		return out
	}
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

type topicResource struct {
	c *client.Client
}

var (
	_ resource.ResourceWithConfigure   = (*topicResource)(nil)
	_ resource.ResourceWithImportState = (*topicResource)(nil)
)

func newTopicResource() resource.Resource { return &topicResource{} }

func (r *topicResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_topic"
}

func (r *topicResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// shrinkReplaces forces a new topic when the partition count goes down: the
// API only grows partitions, and records are keyed to partitions.
func shrinkReplaces(_ context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
	if req.StateValue.IsNull() || req.PlanValue.IsUnknown() || req.PlanValue.IsNull() {
		return
	}
	resp.RequiresReplace = req.PlanValue.ValueInt64() < req.StateValue.ValueInt64()
}

func (r *topicResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A topic of the tenant: a named, partitioned log.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The topic's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the topic, unique in the tenant. Changing it replaces the topic (its records are lost).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"partitions": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(1),
				Description: "Number of partitions (default 1). Increasing it updates the topic in place; decreasing it replaces the topic (its records are lost).",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(shrinkReplaces,
					"Decreasing the partition count replaces the topic.", "Decreasing the partition count replaces the topic.")},
			},
			"config": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Topic settings set explicitly, with Kafka's names (retention.ms, retention.bytes, max.message.bytes, segment.bytes, segment.ms, cleanup.policy). Keys left out take the service's defaults; removing a key returns it to its default.",
			},
			"replication_factor": schema.Int64Attribute{
				Computed:      true,
				Description:   "Number of replicas of each partition, chosen by the service.",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"effective_config": schema.MapAttribute{
				Computed:    true,
				ElementType: types.StringType,
				Description: "Every topic setting in force, defaults included.",
			},
		},
	}
}

func (r *topicResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan topicModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cfg := goStringMap(ctx, plan.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := r.c.CreateTopic(ctx, api.CreateTopicRequest{
		Name: plan.Name.ValueString(), Partitions: int(plan.Partitions.ValueInt64()), Config: cfg})
	if err != nil {
		addAPIError(&resp.Diagnostics, "create topic "+plan.Name.ValueString(), err)
		return
	}
	plan.fill(ctx, t, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *topicResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state topicModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := r.c.Topic(ctx, state.Name.ValueString())
	if isGone(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addAPIError(&resp.Diagnostics, "read topic "+state.Name.ValueString(), err)
		return
	}
	state.fill(ctx, t, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *topicResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state topicModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var upd api.UpdateTopicRequest
	if n := int(plan.Partitions.ValueInt64()); n != int(state.Partitions.ValueInt64()) {
		upd.Partitions = &n
	}
	want := goStringMap(ctx, plan.Config, &resp.Diagnostics)
	had := goStringMap(ctx, state.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	upd.Config = configChanges(had, want)
	name := state.Name.ValueString()
	t, err := r.c.UpdateTopic(ctx, name, upd)
	if err != nil {
		addAPIError(&resp.Diagnostics, "update topic "+name, err)
		return
	}
	plan.fill(ctx, t, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// configChanges is the config part of an update from had to want: keys set
// or changed with their value, keys dropped as null (back to the default),
// unchanged keys left out.
func configChanges(had, want map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range want {
		if old, ok := had[k]; !ok || old != v {
			out[k] = &v
		}
	}
	for k := range had {
		if _, ok := want[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

func (r *topicResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state topicModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteTopic(ctx, state.Name.ValueString()); err != nil && !isGone(err) {
		addAPIError(&resp.Diagnostics, "delete topic "+state.Name.ValueString(), err)
	}
}

// ImportState takes the topic's name.
func (r *topicResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
}

type topicDataSource struct {
	c *client.Client
}

var _ datasource.DataSourceWithConfigure = (*topicDataSource)(nil)

func newTopicDataSource() datasource.DataSource { return &topicDataSource{} }

func (d *topicDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_topic"
}

func (d *topicDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *topicDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dschema.Schema{
		Description: "Looks up one of the tenant's topics by name.",
		Attributes: map[string]dschema.Attribute{
			"id":                 dschema.StringAttribute{Computed: true, Description: "The topic's name."},
			"name":               dschema.StringAttribute{Required: true, Description: "Name of the topic."},
			"partitions":         dschema.Int64Attribute{Computed: true, Description: "Number of partitions."},
			"replication_factor": dschema.Int64Attribute{Computed: true, Description: "Number of replicas of each partition."},
			"config":             dschema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Settings set explicitly."},
			"effective_config":   dschema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Every setting in force, defaults included."},
		},
	}
}

func (d *topicDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m topicModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := d.c.Topic(ctx, m.Name.ValueString())
	if err != nil {
		addAPIError(&resp.Diagnostics, "read topic "+m.Name.ValueString(), err)
		return
	}
	m.fill(ctx, t, &resp.Diagnostics)
	if m.Config.IsNull() {
		m.Config = emptyMap()
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
