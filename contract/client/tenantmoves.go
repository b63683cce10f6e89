package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/contract/api"
)

// AdminMoveTenant starts moving a tenant to a cell of req.Pool.
func (c *Client) AdminMoveTenant(ctx context.Context, tenantID string, req api.MoveTenantRequest) (api.TenantMove, error) {
	return call[api.TenantMove](ctx, c, http.MethodPost, "/v1/admin/tenants/"+esc(tenantID)+"/move", req)
}

// AdminUpdateTenantMove changes a tenant move that has not switched yet.
func (c *Client) AdminUpdateTenantMove(ctx context.Context, id int64, req api.UpdateTenantMoveRequest) (api.TenantMove, error) {
	return call[api.TenantMove](ctx, c, http.MethodPatch, "/v1/admin/tenant-moves/"+strconv.FormatInt(id, 10), req)
}

// AdminTenantMoves lists tenant moves, oldest first; state and tenant,
// when not empty, narrow the list.
func (c *Client) AdminTenantMoves(ctx context.Context, state, tenantID string) ([]api.TenantMove, error) {
	return all[api.TenantMove](ctx, c, withQuery("/v1/admin/tenant-moves", map[string]string{"state": state, "tenant": tenantID}))
}

// AdminTenantMove returns one tenant move with its partitions.
func (c *Client) AdminTenantMove(ctx context.Context, id int64) (api.TenantMove, error) {
	return call[api.TenantMove](ctx, c, http.MethodGet, "/v1/admin/tenant-moves/"+strconv.FormatInt(id, 10), nil)
}

// AdminCancelTenantMove rolls back a tenant move that has not reached
// promoting.
func (c *Client) AdminCancelTenantMove(ctx context.Context, id int64) (api.TenantMove, error) {
	return call[api.TenantMove](ctx, c, http.MethodPost, "/v1/admin/tenant-moves/"+strconv.FormatInt(id, 10)+"/cancel", struct{}{})
}
