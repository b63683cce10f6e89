package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/sluicehq/sluice/contract/client"
)

// resourceBase is what every resource shares: its type name, the API
// client Configure hands it, and import by one attribute.
type resourceBase struct {
	suffix   string // of the type name after the provider's, e.g. "_acl"
	importBy string // the attribute ImportState fills from the import id
	c        *client.Client
}

func (r *resourceBase) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + r.suffix
}

func (r *resourceBase) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// ImportState takes the resource's importBy attribute as the import id.
func (r *resourceBase) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root(r.importBy), req, resp)
}

// replaceOnly is the Update of a resource whose every attribute change
// replaces it (RequiresReplace), so Terraform never calls Update.
type replaceOnly struct {
	what string // "ACLs"
	typ  string // "sluice_acl"
}

func (r replaceOnly) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError(r.what+" cannot be updated", "every change to a "+r.typ+" replaces it; this is a bug in the Sluice provider")
}

// dataSourceBase is what every data source shares: its type name and the
// API client Configure hands it.
type dataSourceBase struct {
	suffix string
	c      *client.Client
}

func (d *dataSourceBase) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.suffix
}

func (d *dataSourceBase) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// decode reads a plan, state or config (get is its Get) into a fresh M; ok
// is false once diags hold an error.
func decode[M any](ctx context.Context, get func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) (m M, ok bool) {
	diags.Append(get(ctx, &m)...)
	return m, !diags.HasError()
}

// readFailed handles the API's error in a Read: a resource the API no
// longer has leaves the state, any other error is reported. It is false
// when err is nil and the Read goes on.
func readFailed(ctx context.Context, resp *resource.ReadResponse, op string, err error) bool {
	switch {
	case isGone(err):
		resp.State.RemoveResource(ctx)
	case err != nil:
		addAPIError(&resp.Diagnostics, op, err)
	default:
		return false
	}
	return true
}

// deleteFailed reports the API's error in a Delete; a resource that is
// already gone is deleted.
func deleteFailed(diags *diag.Diagnostics, op string, err error) {
	if err != nil && !isGone(err) {
		addAPIError(diags, op, err)
	}
}
