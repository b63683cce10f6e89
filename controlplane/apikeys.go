package controlplane

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/scram"
	"github.com/sluicehq/sluice/contract/wire"
)

const keyColumns = `id, description, role, created_at, expires_at, revoked_at, last_used_at`

func (s *Server) scanKey(row pgx.Row) (api.APIKey, error) {
	var k api.APIKey
	err := row.Scan(&k.ID, &k.Description, &k.Role, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.LastUsedAt)
	switch {
	case err != nil:
	case k.RevokedAt != nil:
		k.Status = "revoked"
	case k.ExpiresAt != nil && !s.cfg.Now().Before(*k.ExpiresAt):
		k.Status = "expired"
	default:
		k.Status = "active"
	}
	return k, err
}

func (s *Server) listKeys(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjKeys, authz.ActRead)
	if err != nil {
		return err
	}
	return s.listKeysOf(c, &p.tenantID)
}

func (s *Server) adminListKeys(c echo.Context) error {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return err
	}
	return s.listKeysOf(c, nil)
}

// listKeysOf lists a tenant's keys, or the operator keys for a nil tenant,
// never with secrets.
func (s *Server) listKeysOf(c echo.Context, tenantID *string) error {
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	return listPage(c, s, "list api keys", pg, s.scanKey,
		func(k api.APIKey) string { return k.ID },
		`SELECT `+keyColumns+` FROM api_keys WHERE tenant_id IS NOT DISTINCT FROM $1 AND id > $2 ORDER BY id LIMIT $3`,
		tenantID, pg.after, pg.limit+1)
}

func (s *Server) getKey(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjKeys, authz.ActRead)
	if err != nil {
		return err
	}
	k, err := s.scanKey(s.db.QueryRow(c.Request().Context(), `SELECT `+keyColumns+` FROM api_keys
		WHERE id = $1 AND tenant_id = $2`, c.Param("id"), p.tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NotFound.New("no such API key")
	}
	if err != nil {
		return dbError("load api key", err)
	}
	return c.JSON(http.StatusOK, k)
}

func (s *Server) createKey(c echo.Context) error {
	p, req, err := tenantWrite[api.CreateAPIKeyRequest](s, c, authz.ObjKeys)
	if err != nil {
		return err
	}
	if req.Role == "" {
		req.Role = authz.RoleDeveloper
	}
	if !authz.Valid(authz.KeyRoles, req.Role) {
		return catalog.InvalidRequest.Newf("role must be one of %v", authz.KeyRoles)
	}
	if !authz.AtMost(req.Role, p.role) {
		return catalog.PermissionDenied.Newf("a %s may not create a key with role %s", p.role, req.Role)
	}
	if len(req.Description) > 256 {
		return catalog.InvalidRequest.New("description may be at most 256 characters")
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.cfg.Now()) {
		return catalog.InvalidRequest.New("expires_at must be in the future")
	}
	k, err := s.insertKey(c.Request().Context(), p, &p.tenantID, req.Role, req.Description, req.ExpiresAt, "api_key.create")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, k)
}

func (s *Server) adminCreateKey(c echo.Context) error {
	p, req, err := operatorWrite[api.CreateOperatorKeyRequest](s, c)
	if err != nil {
		return err
	}
	k, err := s.insertKey(c.Request().Context(), p, nil, authz.RoleOperator, req.Description, nil, "operator_key.create")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, k)
}

// insertKey creates a key and returns it with its secret, the only time the
// secret is ever shown.
func (s *Server) insertKey(ctx context.Context, p *principal, tenantID *string, role, desc string, expires *time.Time, action string) (api.APIKey, error) {
	id, secret := credential.NewAPIKey()
	var k api.APIKey
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if tenantID != nil {
			// Serialize key creation per tenant so the active-key cap holds.
			if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, *tenantID); err != nil {
				return err
			}
			var active int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL
				AND (expires_at IS NULL OR expires_at > $2)`, *tenantID, s.cfg.Now()).Scan(&active); err != nil {
				return err
			}
			if active >= s.cfg.MaxActiveKeys {
				return catalog.QuotaExceeded.Newf("a tenant may hold %d active API keys; revoke one first", s.cfg.MaxActiveKeys)
			}
		}
		var err error
		k, err = s.scanKey(tx.QueryRow(ctx, `INSERT INTO api_keys (id, tenant_id, secret_hash, role, description, created_by, expires_at, scram_credentials)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+keyColumns,
			id, tenantID, credential.HashSecret(secret), role, desc, p.actor(), expires, scramCredentials(secret)))
		if err != nil {
			return err
		}
		if tenantID != nil {
			if err := bumpTenantCell(ctx, tx, *tenantID); err != nil {
				return err
			}
		}
		return audit(ctx, tx, p, action, id, map[string]any{"role": role})
	})
	if err := txError("create api key", err); err != nil {
		return k, err
	}
	k.Secret = secret
	return k, nil
}

// scramCredentials derives the key's SCRAM credentials, one per mechanism,
// each with its own random salt and scram.Iterations; brokers check SCRAM
// proofs against them, so the secret is never stored.
func scramCredentials(secret string) []wire.ScramCredential {
	out := make([]wire.ScramCredential, 0, len(scram.Mechanisms))
	for _, m := range scram.Mechanisms {
		c := scram.Derive(m, secret)
		out = append(out, wire.ScramCredential{Mechanism: c.Mechanism, Salt: c.Salt, Iterations: c.Iterations,
			StoredKey: c.StoredKey, ServerKey: c.ServerKey})
	}
	return out
}

func (s *Server) revokeKey(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjKeys, authz.ActWrite)
	if err != nil {
		return err
	}
	return s.revoke(c, p, &p.tenantID)
}

func (s *Server) adminRevokeKey(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	return s.revoke(c, p, nil)
}

// revoke marks a key revoked (idempotently) and answers with the key. A
// tenant's caller may revoke only keys whose role is at most its own, as
// with creating them.
func (s *Server) revoke(c echo.Context, p *principal, tenantID *string) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var k api.APIKey
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if tenantID != nil {
			var role string
			err := tx.QueryRow(ctx, `SELECT role FROM api_keys WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, id, *tenantID).Scan(&role)
			if err != nil {
				return err
			}
			if !authz.AtMost(role, p.role) {
				return catalog.PermissionDenied.Newf("a %s may not revoke a key with role %s", p.role, role)
			}
		}
		var err error
		k, err = s.scanKey(tx.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)
			WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 RETURNING `+keyColumns, id, tenantID, s.cfg.Now()))
		if err != nil {
			return err
		}
		if tenantID != nil {
			if err := bumpTenantCell(ctx, tx, *tenantID); err != nil {
				return err
			}
		}
		return audit(ctx, tx, p, "api_key.revoke", id, nil)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NotFound.New("no such API key")
	}
	if err := txError("revoke api key", err); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k)
}
