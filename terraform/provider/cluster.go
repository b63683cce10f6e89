package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type clusterModel struct {
	ID               types.String `tfsdk:"id"`
	TenantID         types.String `tfsdk:"tenant_id"`
	CellID           types.String `tfsdk:"cell_id"`
	BootstrapServers types.List   `tfsdk:"bootstrap_servers"`
	HTTPEndpoints    types.List   `tfsdk:"http_endpoints"`
}

type clusterDataSource struct{ dataSourceBase }

var _ datasource.DataSourceWithConfigure = (*clusterDataSource)(nil)

func newClusterDataSource() datasource.DataSource {
	return &clusterDataSource{dataSourceBase{suffix: "_cluster"}}
}

func (d *clusterDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Where the provider's tenant connects: its Kafka bootstrap servers and HTTP endpoints.",
		Attributes: map[string]schema.Attribute{
			"id":                schema.StringAttribute{Computed: true, Description: "The tenant's id."},
			"tenant_id":         schema.StringAttribute{Computed: true, Description: "The tenant's id."},
			"cell_id":           schema.StringAttribute{Computed: true, Description: "The cell that serves the tenant."},
			"bootstrap_servers": schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "host:port addresses for Kafka clients' bootstrap.servers."},
			"http_endpoints":    schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "host:port addresses of the HTTP data API."},
		},
	}
}

func (d *clusterDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	cl, err := d.c.Cluster(ctx)
	if err != nil {
		addAPIError(&resp.Diagnostics, "read cluster", err)
		return
	}
	m := clusterModel{
		ID:       types.StringValue(cl.TenantID),
		TenantID: types.StringValue(cl.TenantID),
		CellID:   types.StringValue(cl.CellID),
	}
	diags := &resp.Diagnostics
	var ld diag.Diagnostics
	m.BootstrapServers, ld = types.ListValueFrom(ctx, types.StringType, nonNil(cl.BootstrapServers))
	diags.Append(ld...)
	m.HTTPEndpoints, ld = types.ListValueFrom(ctx, types.StringType, nonNil(cl.HTTPEndpoints))
	diags.Append(ld...)
	diags.Append(resp.State.Set(ctx, &m)...)
}

// nonNil makes an absent list an empty one, so the attribute is [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
