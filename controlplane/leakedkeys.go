package controlplane

import (
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// adminRevokeTenantKey revokes one of a tenant's API keys for an operator
// (DELETE /v1/admin/tenants/{id}/api-keys/{key}; tenantd admin keys
// revoke), as for a leaked key: the brokers drop it with the next cell
// state and close its connections. Idempotent; an unknown tenant or a key
// that is not the tenant's is 404 and changes nothing.
func (s *Server) adminRevokeTenantKey(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenantID, keyID := c.Param("id"), c.Param("key")
	if err := mustExist(ctx, s.db, "tenants", tenantID, "tenant"); err != nil {
		return txError("load tenant", err)
	}
	var k api.APIKey
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		k, err = s.scanKey(tx.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)
			WHERE id = $1 AND tenant_id = $2 RETURNING `+keyColumns, keyID, tenantID, s.cfg.Now()))
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("the tenant has no API key " + keyID)
		}
		if err != nil {
			return err
		}
		return bumpAndAudit(ctx, tx, tenantID, p, "api_key.revoke", keyID, map[string]any{"by": "operator"})
	})
	if err := txError("revoke api key", err); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k)
}
