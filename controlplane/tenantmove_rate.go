package controlplane

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// A tenant move's copy rate (tenant_moves.bytes_per_sec) bounds what its
// destination pulls from the source cell, over all the tenant's
// partitions: each destination partition gets an equal share
// (wire.TopicMirror.BytesPerSec), so a move of twelve partitions at
// 24 MiB/s pulls each at 2 MiB/s, and a partition that has caught up
// leaves its share unused rather than handing it to the others. 0 leaves
// every partition at its destination brokers' -mirror-rate.

// checkMoveRate refuses a negative copy rate.
func checkMoveRate(bytesPerSec int64) error {
	if bytesPerSec < 0 {
		return catalog.InvalidRequest.Newf("bytes_per_sec %d is negative: the most the move copies from the source cell a second, over all its partitions; 0 for the brokers' default", bytesPerSec)
	}
	return nil
}

// partitionRate is each of parts partitions' share of a move's rate,
// rounded up: 0 stays 0 (the brokers' default), anything else is at
// least 1. A move without partitions (a tenant without topics, or a
// cancelled move, whose placement is dropped) shares nothing: 0.
func partitionRate(bytesPerSec int64, parts int) int64 {
	if bytesPerSec == 0 || parts <= 0 {
		return 0
	}
	n := int64(parts)
	return (bytesPerSec + n - 1) / n
}

// adminUpdateTenantMove changes a tenant move's copy rate while its
// destination still mirrors (PATCH /v1/admin/tenant-moves/{id}); the
// destination's state carries the new share, and its pullers take it at
// once. Every refusal changes nothing.
func (s *Server) adminUpdateTenantMove(c echo.Context) error {
	p, req, err := operatorWrite[api.UpdateTenantMoveRequest](s, c)
	if err != nil {
		return err
	}
	id, err := tenantMoveID(c)
	if err != nil {
		return err
	}
	if req.BytesPerSec == nil {
		return catalog.InvalidRequest.New("bytes_per_sec is required: the only setting of a tenant move that can change")
	}
	if err := checkMoveRate(*req.BytesPerSec); err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var tenant, dest, state string
		var was int64
		err := tx.QueryRow(ctx, `SELECT tenant_id, dest_cell_id, state, bytes_per_sec FROM tenant_moves WHERE id = $1 FOR UPDATE`, id).
			Scan(&tenant, &dest, &state, &was)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such tenant move")
		}
		if err != nil {
			return err
		}
		switch {
		case state == tmDone || state == tmCancelled:
			return catalog.InvalidRequest.Newf("tenant move %d is %s; its rate can no longer change", id, state)
		case !beforeSwitch(state):
			return catalog.InvalidRequest.Newf("tenant move %d is %s: the destination has stopped copying from the source, so there is no rate to change", id, state)
		case was == *req.BytesPerSec:
			return nil // the same rate: nothing to publish
		}
		if _, err := tx.Exec(ctx, `UPDATE tenant_moves SET bytes_per_sec = $2, updated_at = now() WHERE id = $1`, id, *req.BytesPerSec); err != nil {
			return err
		}
		actor := *p
		actor.tenantID = tenant
		return bumpCellAndAudit(ctx, tx, dest, &actor, "tenant.move.update", strconv.FormatInt(id, 10),
			map[string]any{"bytes_per_sec": *req.BytesPerSec, "was": was})
	})
	if err := txError("update tenant move", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadTenantMove, id)
}
