package client

import (
	"context"
	"net/http"

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
