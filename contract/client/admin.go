package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/contract/api"
)

// AdminTenants lists tenants; sort is "name" or "load".
func (c *Client) AdminTenants(ctx context.Context, sort string) ([]api.AdminTenant, error) {
	path := "/v1/admin/tenants"
	if sort != "" {
		path += "?sort=" + esc(sort)
	}
	return all[api.AdminTenant](ctx, c, path)
}

// AdminTenant returns one tenant with its load.
func (c *Client) AdminTenant(ctx context.Context, id string) (api.AdminTenant, error) {
	return call[api.AdminTenant](ctx, c, http.MethodGet, "/v1/admin/tenants/"+esc(id), nil)
}

// AdminUpdateTenant suspends, resumes or re-plans a tenant.
func (c *Client) AdminUpdateTenant(ctx context.Context, id string, req api.UpdateTenantRequest) (api.AdminTenant, error) {
	return call[api.AdminTenant](ctx, c, http.MethodPatch, "/v1/admin/tenants/"+esc(id), req)
}

// AdminQuotas returns a tenant's quotas.
func (c *Client) AdminQuotas(ctx context.Context, tenantID string) (api.Quotas, error) {
	return call[api.Quotas](ctx, c, http.MethodGet, "/v1/admin/tenants/"+esc(tenantID)+"/quotas", nil)
}

// AdminSetQuotas replaces a tenant's quotas.
func (c *Client) AdminSetQuotas(ctx context.Context, tenantID string, q api.Quotas) (api.Quotas, error) {
	return call[api.Quotas](ctx, c, http.MethodPut, "/v1/admin/tenants/"+esc(tenantID)+"/quotas", q)
}

// AdminPools lists pools.
func (c *Client) AdminPools(ctx context.Context) ([]api.Pool, error) {
	return all[api.Pool](ctx, c, "/v1/admin/pools")
}

// AdminCreatePool creates a pool.
func (c *Client) AdminCreatePool(ctx context.Context, req api.CreatePoolRequest) (api.Pool, error) {
	return call[api.Pool](ctx, c, http.MethodPost, "/v1/admin/pools", req)
}

// AdminCells lists cells with their brokers.
func (c *Client) AdminCells(ctx context.Context) ([]api.Cell, error) {
	return all[api.Cell](ctx, c, "/v1/admin/cells")
}

// AdminCell returns one cell.
func (c *Client) AdminCell(ctx context.Context, id string) (api.Cell, error) {
	return call[api.Cell](ctx, c, http.MethodGet, "/v1/admin/cells/"+esc(id), nil)
}

// AdminCreateCell creates a cell.
func (c *Client) AdminCreateCell(ctx context.Context, req api.CreateCellRequest) (api.Cell, error) {
	return call[api.Cell](ctx, c, http.MethodPost, "/v1/admin/cells", req)
}

// AdminBrokers lists brokers.
func (c *Client) AdminBrokers(ctx context.Context) ([]api.Broker, error) {
	return all[api.Broker](ctx, c, "/v1/admin/brokers")
}

// AdminCreateBroker adds a broker to a cell.
func (c *Client) AdminCreateBroker(ctx context.Context, req api.CreateBrokerRequest) (api.Broker, error) {
	return call[api.Broker](ctx, c, http.MethodPost, "/v1/admin/brokers", req)
}

// AdminUpdateBroker changes a broker.
func (c *Client) AdminUpdateBroker(ctx context.Context, id string, req api.UpdateBrokerRequest) (api.Broker, error) {
	return call[api.Broker](ctx, c, http.MethodPatch, "/v1/admin/brokers/"+esc(id), req)
}

// AdminCreateKey creates an operator key.
func (c *Client) AdminCreateKey(ctx context.Context, req api.CreateOperatorKeyRequest) (api.APIKey, error) {
	return call[api.APIKey](ctx, c, http.MethodPost, "/v1/admin/api-keys", req)
}

// AdminDeleteBroker removes a broker that holds no replicas.
func (c *Client) AdminDeleteBroker(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/admin/brokers/"+esc(id), nil, nil)
}

// AdminDrainBroker sets a broker draining and starts the moves that take
// every replica off it.
func (c *Client) AdminDrainBroker(ctx context.Context, id string) (api.Drain, error) {
	return call[api.Drain](ctx, c, http.MethodPost, "/v1/admin/brokers/"+esc(id)+"/drain", struct{}{})
}

// MoveFilter narrows AdminMoves; empty fields do not filter.
type MoveFilter struct {
	State  string // running, completed, cancelling, cancelled or failed
	Cell   string
	Broker string // moves onto or off this broker
}

// AdminMoves lists replica moves, oldest first.
func (c *Client) AdminMoves(ctx context.Context, f MoveFilter) ([]api.Move, error) {
	return all[api.Move](ctx, c, withQuery("/v1/admin/moves", map[string]string{"state": f.State, "cell": f.Cell, "broker": f.Broker}))
}

// AdminMove returns one move with its progress.
func (c *Client) AdminMove(ctx context.Context, id int64) (api.Move, error) {
	return call[api.Move](ctx, c, http.MethodGet, "/v1/admin/moves/"+strconv.FormatInt(id, 10), nil)
}

// AdminCreateMove starts moving a partition's replicas.
func (c *Client) AdminCreateMove(ctx context.Context, req api.CreateMoveRequest) (api.Move, error) {
	return call[api.Move](ctx, c, http.MethodPost, "/v1/admin/moves", req)
}

// AdminCancelMove rolls a running move back to its original replicas.
func (c *Client) AdminCancelMove(ctx context.Context, id int64) (api.Move, error) {
	return call[api.Move](ctx, c, http.MethodPost, "/v1/admin/moves/"+strconv.FormatInt(id, 10)+"/cancel", struct{}{})
}
