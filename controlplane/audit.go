package controlplane

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// audit records a change in the same transaction as the change itself.
func audit(ctx context.Context, tx pgx.Tx, p *principal, action, target string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	var tenant *string
	if p.tenantID != "" {
		tenant = &p.tenantID
	}
	_, err := tx.Exec(ctx, `INSERT INTO audit_log (tenant_id, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)`,
		tenant, p.actor(), action, target, detail)
	return err
}

// bumpTenantCell advances the desired-state version of the tenant's home
// cell, so its brokers pick up the change, and wakes long-polls; while the
// tenant moves, the destination serves its keys, ACLs and quotas too, so
// its cell is bumped with it.
func bumpTenantCell(ctx context.Context, tx pgx.Tx, tenantID string) error {
	rows, err := tx.Query(ctx, `UPDATE cells SET state_version = state_version + 1
		WHERE id = (SELECT home_cell_id FROM tenants WHERE id = $1)
		   OR id IN (SELECT m.dest_cell_id FROM tenant_moves m WHERE m.tenant_id = $1 AND `+tmUnfinished+`) RETURNING id`, tenantID)
	if err != nil {
		return err
	}
	cells, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(cells) == 0 {
		return pgx.ErrNoRows // no such tenant, as before
	}
	for _, cell := range cells {
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, stateChannel, cell); err != nil {
			return err
		}
	}
	return nil
}

// bumpAndAudit ends a transaction that changed what the tenant's cell
// serves: the cell picks the change up (bumpTenantCell) and the audit log
// records who made it.
func bumpAndAudit(ctx context.Context, tx pgx.Tx, tenantID string, p *principal, action, target string, detail map[string]any) error {
	if err := bumpTenantCell(ctx, tx, tenantID); err != nil {
		return err
	}
	return audit(ctx, tx, p, action, target, detail)
}

// bumpCellAndAudit is bumpAndAudit for a known cell.
func bumpCellAndAudit(ctx context.Context, tx pgx.Tx, cellID string, p *principal, action, target string, detail map[string]any) error {
	if err := bumpCell(ctx, tx, cellID); err != nil {
		return err
	}
	return audit(ctx, tx, p, action, target, detail)
}

// bumpCell is bumpTenantCell for a known cell.
func bumpCell(ctx context.Context, tx pgx.Tx, cellID string) error {
	if _, err := tx.Exec(ctx, `UPDATE cells SET state_version = state_version + 1 WHERE id = $1`, cellID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, stateChannel, cellID)
	return err
}
