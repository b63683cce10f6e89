package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

const adminTenantSelect = `SELECT t.id, t.name, t.plan, t.status, t.pool_id, t.home_cell_id, t.created_at,
	(SELECT count(*) FROM topics x WHERE x.tenant_id = t.id) AS topic_count,
	(SELECT coalesce(sum(x.partitions), 0) FROM topics x WHERE x.tenant_id = t.id) AS partition_count,
	(SELECT count(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())) AS active_keys,
	(SELECT coalesce(sum(s.size), 0)::bigint FROM topics x JOIN partitions p ON p.topic_id = x.id
		CROSS JOIN LATERAL (SELECT max(ps.size_bytes) AS size FROM partition_status ps
			WHERE ps.topic_id = p.topic_id AND ps.partition = p.partition) s
		WHERE x.tenant_id = t.id) AS stored_bytes,
	q.produce_bytes_per_sec, q.produce_messages_per_sec, q.fetch_bytes_per_sec, q.max_partitions,
	q.max_topics, q.max_connections, q.max_storage_bytes, q.max_message_bytes, q.max_requests_per_sec, q.max_retention_ms, q.updated_at
	FROM tenants t JOIN quotas q ON q.tenant_id = t.id`

func scanAdminTenant(row pgx.Row) (api.AdminTenant, error) {
	var t api.AdminTenant
	fields := append(tenantFields(&t.Tenant), &t.Topics, &t.Partitions, &t.ActiveKeys, &t.StoredBytes)
	fields = append(fields, quotaFields(&t.Quotas)...)
	return t, row.Scan(fields...)
}

// adminListTenants lists tenants by name, or by load (partitions, most
// first) with ?sort=load.
func (s *Server) adminListTenants(c echo.Context) error {
	pg, err := s.operatorPage(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var rows pgx.Rows
	switch c.QueryParam("sort") {
	case "", "name":
		rows, err = s.db.Query(ctx, adminTenantSelect+` WHERE t.name > $1 ORDER BY t.name LIMIT $2`, pg.after, pg.limit+1)
	case "load":
		// Keyset on (partitions desc, name): the token holds both.
		var afterLoad int = 1 << 30
		var afterName string
		if pg.after != "" {
			if _, err := fmt.Sscanf(pg.after, "%d/%s", &afterLoad, &afterName); err != nil {
				return catalog.InvalidPageToken.New("")
			}
		}
		rows, err = s.db.Query(ctx, `SELECT * FROM (`+adminTenantSelect+`) x
			WHERE x.partition_count < $1 OR (x.partition_count = $1 AND x.name > $2)
			ORDER BY x.partition_count DESC, x.name LIMIT $3`, afterLoad, afterName, pg.limit+1)
	default:
		return catalog.InvalidRequest.New(`sort must be "name" or "load"`)
	}
	if err != nil {
		return dbError("list tenants", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.AdminTenant, error) { return scanAdminTenant(r) })
	if err != nil {
		return dbError("list tenants", err)
	}
	key := func(t api.AdminTenant) string { return t.Name }
	if c.QueryParam("sort") == "load" {
		key = func(t api.AdminTenant) string { return fmt.Sprintf("%d/%s", t.Partitions, t.Name) }
	}
	items, next := trim(pg, ts, key)
	return c.JSON(http.StatusOK, api.Page[api.AdminTenant]{Items: items, NextPageToken: next})
}

func (s *Server) loadAdminTenant(ctx context.Context, id string) (api.AdminTenant, error) {
	t, err := scanAdminTenant(s.db.QueryRow(ctx, adminTenantSelect+` WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, catalog.NotFound.New("no such tenant")
	}
	if err != nil {
		return t, dbError("load tenant", err)
	}
	return t, nil
}

func (s *Server) adminGetTenant(c echo.Context) error { return operatorGet(s, c, s.loadAdminTenant) }

func (s *Server) adminUpdateTenant(c echo.Context) error {
	p, req, err := operatorWrite[api.UpdateTenantRequest](s, c)
	if err != nil {
		return err
	}
	if req.Status != nil && *req.Status != "active" && *req.Status != "suspended" {
		return catalog.InvalidRequest.New(`status must be "active" or "suspended"`)
	}
	var quotas api.Quotas
	if req.Plan != nil {
		var ok bool
		if quotas, ok = plans[*req.Plan]; !ok {
			return catalog.InvalidRequest.New(`plan must be "free", "standard" or "dedicated"`)
		}
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tenants SET status = coalesce($2, status), plan = coalesce($3, plan) WHERE id = $1`,
			id, req.Status, req.Plan)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return catalog.NotFound.New("no such tenant")
		}
		if req.Plan != nil {
			if err := storeQuotas(ctx, tx, id, quotas); err != nil {
				return err
			}
		}
		return bumpAndAudit(ctx, tx, id, p, "tenant.update", id, map[string]any{"status": req.Status, "plan": req.Plan})
	})
	if err := txError("update tenant", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadAdminTenant, id)
}
