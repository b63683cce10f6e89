package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
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
	resourceBase
}

var (
	_ resource.ResourceWithConfigure      = (*topicResource)(nil)
	_ resource.ResourceWithImportState    = (*topicResource)(nil)
	_ resource.ResourceWithValidateConfig = (*topicResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*topicResource)(nil)
)

func newTopicResource() resource.Resource {
	return &topicResource{resourceBase{suffix: "_topic", importBy: "name"}}
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
				Description:   "Name of the topic, unique in the tenant: 1 to 249 letters, digits, '.', '_' and '-', not starting with \"__\". Changing it replaces the topic (its records are lost).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"partitions": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(defaultPartitions),
				Description: "Number of partitions (default 1), from 1 to the tenant's max_partitions quota. Increasing it updates the topic in place. It cannot be decreased: a plan that lowers it below the topic's count fails. A count raised outside Terraform is kept, with a warning, until the configuration catches up.",
			},
			"config": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Topic settings set explicitly, with Kafka's names (" + strings.Join(topicspec.Keys, ", ") + "). Keys and values are checked when Terraform plans. Keys left out take the service's defaults; removing a key returns it to its default.",
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
	plan, ok := decode[topicModel](ctx, req.Plan.Get, &resp.Diagnostics)
	if !ok {
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
	setAppliedPartitions(ctx, resp.Private, plan.Partitions.ValueInt64(), &resp.Diagnostics)
}

func (r *topicResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[topicModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	t, err := r.c.Topic(ctx, state.Name.ValueString())
	if readFailed(ctx, resp, "read topic "+state.Name.ValueString(), err) {
		return
	}
	if appliedPartitions(ctx, resp.Private) == 0 && !state.Partitions.IsNull() && !state.Partitions.IsUnknown() {
		// A state from before appliedPartitionsKey: its count is what
		// Terraform last applied.
		setAppliedPartitions(ctx, resp.Private, state.Partitions.ValueInt64(), &resp.Diagnostics)
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
	// What the configuration asked for, not the plan: a count kept from
	// outside Terraform must go on warning until the configuration has it.
	var asked types.Int64
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("partitions"), &asked)...)
	applied := int64(defaultPartitions)
	if !asked.IsNull() && !asked.IsUnknown() {
		applied = asked.ValueInt64()
	}
	setAppliedPartitions(ctx, resp.Private, applied, &resp.Diagnostics)
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
	state, ok := decode[topicModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	deleteFailed(&resp.Diagnostics, "delete topic "+state.Name.ValueString(), r.c.DeleteTopic(ctx, state.Name.ValueString()))
}

// defaultPartitions is a topic's partition count when the configuration
// leaves it out, as with the control plane.
const defaultPartitions = 1

// appliedPartitionsKey names the private state holding the partition count
// the configuration asked for when Terraform last created or updated the
// topic. It tells a count lowered in the configuration (a plan error) from
// a count raised outside Terraform (kept, with a warning): after a refresh
// both look the same, a configuration below the topic's count.
const appliedPartitionsKey = "applied_partitions"

// privateState is what Read, Create, Update and ModifyPlan get and set of a
// resource's private state.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// appliedPartitions reads appliedPartitionsKey; 0 when it is not known (an
// imported topic, or a state written by an older provider).
func appliedPartitions(ctx context.Context, p privateState) int64 {
	if p == nil {
		return 0
	}
	b, _ := p.GetKey(ctx, appliedPartitionsKey)
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func setAppliedPartitions(ctx context.Context, p privateState, n int64, diags *diag.Diagnostics) {
	if p != nil {
		diags.Append(p.SetKey(ctx, appliedPartitionsKey, []byte(strconv.FormatInt(n, 10)))...)
	}
}

// planPartitions decides a topic's planned partition count from the count
// it has (live, as just refreshed), the count the configuration asks for
// (want) and the count it asked for when Terraform last applied it
// (applied, 0 when not known). Kafka partitions only grow, and records are
// placed on partitions by key, so Terraform never shrinks or replaces a
// topic over its count:
//   - want at or above live: want (growing is an update in place);
//   - want below live, but not below applied: the count was raised outside
//     Terraform (console, API, kafka-topics --alter); live is kept, so the
//     plan shows no change, with a warning;
//   - want below live and below applied (or applied unknown): the
//     configuration lowers the count, an error.
func planPartitions(live, want, applied int64) (int64, diag.Diagnostic) {
	at := path.Root("partitions")
	switch {
	case want >= live:
		return want, nil
	case applied > 0 && want >= applied:
		return live, diag.NewAttributeWarningDiagnostic(at, "Partitions raised outside Terraform",
			fmt.Sprintf("partitions were raised outside Terraform to %d; keeping %d — set partitions = %d to silence this. "+
				"The configuration asks for %d, but Kafka partitions only grow, so Terraform neither lowers nor replaces the topic.",
				live, live, live, want))
	default:
		return live, diag.NewAttributeErrorDiagnostic(at, "Partitions cannot be lowered",
			fmt.Sprintf("partitions cannot be lowered from %d to %d: Kafka partitions only grow, and records are placed on partitions by key, "+
				"so the topic keeps its %d partitions. Set partitions = %d. To have fewer partitions, create a topic under another name "+
				"and move producers and consumers to it; Terraform never deletes a topic over its partition count.",
				live, want, live, live))
	}
}

// addRuleError reports a broken topic rule (topicspec) with the same code
// the API would answer with at apply.
func addRuleError(diags *diag.Diagnostics, at path.Path, summary string, err error) {
	var ce *catalog.Error
	if errors.As(err, &ce) {
		diags.AddAttributeError(at, fmt.Sprintf("%s (%s)", summary, ce.Entry.Code), ce.Message)
		return
	}
	diags.AddAttributeError(at, summary, err.Error())
}

// knownStrings is the known elements of a map attribute.
func knownStrings(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]string {
	out := map[string]string{}
	if v.IsNull() || v.IsUnknown() {
		return out
	}
	var elems map[string]types.String
	diags.Append(v.ElementsAs(ctx, &elems, true)...)
	for k, e := range elems {
		if !e.IsUnknown() && !e.IsNull() {
			out[k] = e.ValueString()
		}
	}
	return out
}

// ValidateConfig checks, before any call and without the provider's
// settings, the rules that hold for every tenant, with the control plane's
// own code (topicspec): the name, at least 1 partition, known config keys
// and each value's bounds. ModifyPlan adds the tenant's quotas.
func (r *topicResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	m, ok := decode[topicModel](ctx, req.Config.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	if !m.Name.IsNull() && !m.Name.IsUnknown() {
		if err := topicspec.ValidName(m.Name.ValueString()); err != nil {
			addRuleError(&resp.Diagnostics, path.Root("name"), "Invalid topic name", err)
		}
	}
	if !m.Partitions.IsNull() && !m.Partitions.IsUnknown() {
		if err := topicspec.ValidPartitions(int(m.Partitions.ValueInt64()), nil); err != nil {
			addRuleError(&resp.Diagnostics, path.Root("partitions"), "Invalid partition count", err)
		}
	}
	if err := topicspec.ValidateConfig(knownStrings(ctx, m.Config, &resp.Diagnostics), nil); err != nil {
		addRuleError(&resp.Diagnostics, path.Root("config"), "Invalid topic config", err)
	}
}

// ModifyPlan keeps a topic from ever being planned for replacement over its
// partition count (planPartitions), and checks a topic being created or
// changed against the tenant's quotas, read from the API, so that a count
// or a value above them fails the plan rather than the apply.
func (r *topicResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan topicModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	var prior *topicModel
	if !req.State.Raw.IsNull() {
		prior = new(topicModel)
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
		if !plan.Name.Equal(prior.Name) {
			prior = nil // a new name is a new topic
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if prior != nil && !plan.Partitions.IsUnknown() && !prior.Partitions.IsNull() && !prior.Partitions.IsUnknown() {
		n, d := planPartitions(prior.Partitions.ValueInt64(), plan.Partitions.ValueInt64(), appliedPartitions(ctx, req.Private))
		if d != nil {
			resp.Diagnostics.Append(d)
			if d.Severity() == diag.SeverityError {
				return
			}
		}
		if n != plan.Partitions.ValueInt64() {
			plan.Partitions = types.Int64Value(n)
			if plan.Config.Equal(prior.Config) {
				// Nothing else changes: the values the framework marked
				// unknown because of the configured count stay as they are.
				plan.EffectiveConfig = prior.EffectiveConfig
			}
			resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		}
	}
	changed := prior == nil || !plan.Partitions.Equal(prior.Partitions) || !plan.Config.Equal(prior.Config)
	if r.c == nil || !changed || resp.Diagnostics.HasError() {
		return
	}
	q, err := r.c.Quotas(ctx)
	if err != nil {
		resp.Diagnostics.AddWarning("Tenant quotas not checked",
			fmt.Sprintf("read the tenant's quotas: %s; the topic is checked against them at apply instead.", err))
		return
	}
	if !plan.Partitions.IsUnknown() && (prior == nil || plan.Partitions.ValueInt64() > prior.Partitions.ValueInt64()) {
		if err := topicspec.ValidPartitions(int(plan.Partitions.ValueInt64()), &q); err != nil {
			addRuleError(&resp.Diagnostics, path.Root("partitions"), "Invalid partition count", err)
		}
	}
	if !plan.Config.IsUnknown() {
		if err := topicspec.ValidateConfig(knownStrings(ctx, plan.Config, &resp.Diagnostics), &q); err != nil {
			addRuleError(&resp.Diagnostics, path.Root("config"), "Invalid topic config", err)
		}
	}
}

type topicDataSource struct{ dataSourceBase }

var _ datasource.DataSourceWithConfigure = (*topicDataSource)(nil)

func newTopicDataSource() datasource.DataSource {
	return &topicDataSource{dataSourceBase{suffix: "_topic"}}
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
	m, ok := decode[topicModel](ctx, req.Config.Get, &resp.Diagnostics)
	if !ok {
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
