package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sluicehq/sluice/contract/api"
)

// quotaModel is sluice_quota's state: one tenant's limits.
type quotaModel struct {
	ID                    types.String `tfsdk:"id"`
	TenantID              types.String `tfsdk:"tenant_id"`
	ProduceBytesPerSec    types.Int64  `tfsdk:"produce_bytes_per_sec"`
	ProduceMessagesPerSec types.Int64  `tfsdk:"produce_messages_per_sec"`
	FetchBytesPerSec      types.Int64  `tfsdk:"fetch_bytes_per_sec"`
	MaxPartitions         types.Int64  `tfsdk:"max_partitions"`
	MaxTopics             types.Int64  `tfsdk:"max_topics"`
	MaxConnections        types.Int64  `tfsdk:"max_connections"`
	MaxStorageBytes       types.Int64  `tfsdk:"max_storage_bytes"`
	MaxMessageBytes       types.Int64  `tfsdk:"max_message_bytes"`
	MaxRequestsPerSec     types.Int64  `tfsdk:"max_requests_per_sec"`
	MaxRetentionMs        types.Int64  `tfsdk:"max_retention_ms"`
}

// quotaFields describes every quota: its attribute, where it lives in the
// model, and how to read and write it in the API's shape.
var quotaFields = []struct {
	attr, desc string
	model      func(*quotaModel) *types.Int64
	get        func(*api.Quotas) int64
	set        func(*api.Quotas, int64)
}{
	{"produce_bytes_per_sec", "Bytes per second the tenant may produce.",
		func(m *quotaModel) *types.Int64 { return &m.ProduceBytesPerSec },
		func(q *api.Quotas) int64 { return q.ProduceBytesPerSec }, func(q *api.Quotas, v int64) { q.ProduceBytesPerSec = v }},
	{"produce_messages_per_sec", "Messages per second the tenant may produce.",
		func(m *quotaModel) *types.Int64 { return &m.ProduceMessagesPerSec },
		func(q *api.Quotas) int64 { return q.ProduceMessagesPerSec }, func(q *api.Quotas, v int64) { q.ProduceMessagesPerSec = v }},
	{"fetch_bytes_per_sec", "Bytes per second the tenant may fetch.",
		func(m *quotaModel) *types.Int64 { return &m.FetchBytesPerSec },
		func(q *api.Quotas) int64 { return q.FetchBytesPerSec }, func(q *api.Quotas, v int64) { q.FetchBytesPerSec = v }},
	{"max_partitions", "Partitions the tenant may have in all (and in one topic).",
		func(m *quotaModel) *types.Int64 { return &m.MaxPartitions },
		func(q *api.Quotas) int64 { return int64(q.MaxPartitions) }, func(q *api.Quotas, v int64) { q.MaxPartitions = int(v) }},
	{"max_topics", "Topics the tenant may have.",
		func(m *quotaModel) *types.Int64 { return &m.MaxTopics },
		func(q *api.Quotas) int64 { return int64(q.MaxTopics) }, func(q *api.Quotas, v int64) { q.MaxTopics = int(v) }},
	{"max_connections", "Kafka connections the tenant may hold open.",
		func(m *quotaModel) *types.Int64 { return &m.MaxConnections },
		func(q *api.Quotas) int64 { return int64(q.MaxConnections) }, func(q *api.Quotas, v int64) { q.MaxConnections = int(v) }},
	{"max_storage_bytes", "Bytes the tenant may store.",
		func(m *quotaModel) *types.Int64 { return &m.MaxStorageBytes },
		func(q *api.Quotas) int64 { return q.MaxStorageBytes }, func(q *api.Quotas, v int64) { q.MaxStorageBytes = v }},
	{"max_message_bytes", "Largest message the tenant may produce (at most 64 MiB).",
		func(m *quotaModel) *types.Int64 { return &m.MaxMessageBytes },
		func(q *api.Quotas) int64 { return int64(q.MaxMessageBytes) }, func(q *api.Quotas, v int64) { q.MaxMessageBytes = int(v) }},
	{"max_requests_per_sec", "Requests per second the tenant may send.",
		func(m *quotaModel) *types.Int64 { return &m.MaxRequestsPerSec },
		func(q *api.Quotas) int64 { return int64(q.MaxRequestsPerSec) }, func(q *api.Quotas, v int64) { q.MaxRequestsPerSec = int(v) }},
	{"max_retention_ms", "Longest retention.ms a topic of the tenant may have.",
		func(m *quotaModel) *types.Int64 { return &m.MaxRetentionMs },
		func(q *api.Quotas) int64 { return q.MaxRetentionMs }, func(q *api.Quotas, v int64) { q.MaxRetentionMs = v }},
}

func (m *quotaModel) fill(tenantID string, q api.Quotas) {
	m.ID = types.StringValue(tenantID)
	m.TenantID = types.StringValue(tenantID)
	for _, f := range quotaFields {
		*f.model(m) = types.Int64Value(f.get(&q))
	}
}

// merge returns cur with every quota m sets; the rest keep their values.
func (m *quotaModel) merge(cur api.Quotas) api.Quotas {
	for _, f := range quotaFields {
		if v := *f.model(m); !v.IsNull() && !v.IsUnknown() {
			f.set(&cur, v.ValueInt64())
		}
	}
	return cur
}

type quotaResource struct {
	resourceBase
}

var (
	_ resource.ResourceWithConfigure   = (*quotaResource)(nil)
	_ resource.ResourceWithImportState = (*quotaResource)(nil)
)

func newQuotaResource() resource.Resource {
	return &quotaResource{resourceBase{suffix: "_quota", importBy: "tenant_id"}}
}

func (r *quotaResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed: true, Description: "The tenant's id.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"tenant_id": schema.StringAttribute{
			Required: true, Description: "Id of the tenant whose quotas these are. Changing it manages another tenant's quotas.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
	}
	for _, f := range quotaFields {
		attrs[f.attr] = schema.Int64Attribute{
			Optional: true, Computed: true,
			Description:   f.desc + " Must be greater than 0. Left unset, the tenant keeps its current value.",
			PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
		}
	}
	resp.Schema = schema.Schema{
		Description: "A tenant's quotas. Needs an operator's API key. Destroying it leaves the quotas as they are: " +
			"the API has no reset; it only stops Terraform managing them.",
		Attributes: attrs,
	}
}

// put sets the planned quotas over the tenant's current ones.
func (r *quotaResource) put(ctx context.Context, plan *quotaModel) error {
	tenant := plan.TenantID.ValueString()
	cur, err := r.c.AdminQuotas(ctx, tenant)
	if err != nil {
		return err
	}
	out, err := r.c.AdminSetQuotas(ctx, tenant, plan.merge(cur))
	if err != nil {
		return err
	}
	plan.fill(tenant, out)
	return nil
}

func (r *quotaResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *quotaResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[quotaModel](ctx, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	tenant := state.TenantID.ValueString()
	q, err := r.c.AdminQuotas(ctx, tenant)
	if readFailed(ctx, resp, "read quotas of tenant "+tenant, err) {
		return
	}
	state.fill(tenant, q)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *quotaResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

// apply sets the planned quotas (create and update are the same PUT) and
// records what the API answered.
func (r *quotaResource) apply(ctx context.Context, p tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var plan quotaModel
	diags.Append(p.Get(ctx, &plan)...)
	if diags.HasError() {
		return
	}
	if err := r.put(ctx, &plan); err != nil {
		addAPIError(diags, "set quotas of tenant "+plan.TenantID.ValueString(), err)
		return
	}
	diags.Append(state.Set(ctx, &plan)...)
}

// Delete only forgets the quotas: the API cannot reset them, and a tenant
// without quotas does not exist.
func (r *quotaResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state quotaModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.AddWarning("Quotas left as set",
		"Terraform no longer manages the quotas of tenant "+state.TenantID.ValueString()+
			"; they keep their current values. Change them with another sluice_quota or the admin API.")
}
