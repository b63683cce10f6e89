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
)

// maxThrottle bounds how long a temporary quota may last: a longer one is
// a quota change (PUT .../quotas), which stays until changed back.
const maxThrottle = 7 * 24 * time.Hour

// adminSetThrottle puts a temporary quota on a tenant
// (PUT /v1/admin/tenants/{id}/throttle), replacing any earlier one. Bad
// input is refused before anything changes: an unknown tenant (404), no
// rate, a rate not above 0, an expiry in the past or beyond maxThrottle.
func (s *Server) adminSetThrottle(c echo.Context) error {
	p, req, err := operatorWrite[api.ThrottleRequest](s, c)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	expires, err := validateThrottle(req, now)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "tenants", id, "tenant"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tenant_throttles (tenant_id, produce_bytes_per_sec, produce_messages_per_sec,
			fetch_bytes_per_sec, reason, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant_id) DO UPDATE SET produce_bytes_per_sec = $2, produce_messages_per_sec = $3,
			fetch_bytes_per_sec = $4, reason = $5, created_by = $6, created_at = $7, expires_at = $8`,
			id, req.ProduceBytesPerSec, req.ProduceMessagesPerSec, req.FetchBytesPerSec, req.Reason, p.actor(), now, expires); err != nil {
			return err
		}
		return bumpAndAudit(ctx, tx, id, p, "tenant.throttle", id, map[string]any{"throttle": req, "expires_at": expires})
	})
	if err := txError("throttle tenant", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadThrottle, id)
}

func validateThrottle(req api.ThrottleRequest, now time.Time) (time.Time, error) {
	rates := 0
	for _, r := range []struct {
		name string
		v    *int64
	}{{"produce_bytes_per_sec", req.ProduceBytesPerSec}, {"produce_messages_per_sec", req.ProduceMessagesPerSec}, {"fetch_bytes_per_sec", req.FetchBytesPerSec}} {
		if r.v == nil {
			continue
		}
		if *r.v <= 0 {
			return time.Time{}, catalog.InvalidRequest.Newf("%s must be greater than 0 (got %d)", r.name, *r.v)
		}
		rates++
	}
	if rates == 0 {
		return time.Time{}, catalog.InvalidRequest.New("name at least one rate: produce_bytes_per_sec, produce_messages_per_sec or fetch_bytes_per_sec")
	}
	var expires time.Time
	switch {
	case req.ExpiresAt != nil && req.DurationSeconds != 0:
		return time.Time{}, catalog.InvalidRequest.New("give expires_at or duration_seconds, not both")
	case req.ExpiresAt != nil:
		expires = *req.ExpiresAt
	case req.DurationSeconds < 0:
		return time.Time{}, catalog.InvalidRequest.Newf("duration_seconds must be greater than 0 (got %d)", req.DurationSeconds)
	case req.DurationSeconds > 0:
		expires = now.Add(time.Duration(req.DurationSeconds) * time.Second)
	default:
		return time.Time{}, catalog.InvalidRequest.New("a throttle needs an expiry: expires_at or duration_seconds")
	}
	if !expires.After(now) {
		return time.Time{}, catalog.InvalidRequest.Newf("expires_at %s is not in the future", expires.UTC().Format(time.RFC3339))
	}
	if expires.Sub(now) > maxThrottle {
		return time.Time{}, catalog.InvalidRequest.Newf("a throttle lasts at most %s; change the quotas instead", maxThrottle)
	}
	return expires.UTC(), nil
}

// adminGetThrottle answers the tenant's unexpired throttle (404 when it
// has none).
func (s *Server) adminGetThrottle(c echo.Context) error { return operatorGet(s, c, s.loadThrottle) }

// adminDeleteThrottle lifts a tenant's throttle before it expires (404
// when it has none).
func (s *Server) adminDeleteThrottle(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	t, err := s.loadThrottle(ctx, id)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM tenant_throttles WHERE tenant_id = $1`, id); err != nil {
			return err
		}
		return bumpAndAudit(ctx, tx, id, p, "tenant.unthrottle", id, nil)
	})
	if err := txError("lift throttle", err); err != nil {
		return err
	}
	if t.Effective, err = loadQuotas(ctx, s.db, id); err != nil {
		return dbError("load quotas", err)
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) loadThrottle(ctx context.Context, id string) (api.Throttle, error) {
	t := api.Throttle{TenantID: id}
	err := s.db.QueryRow(ctx, `SELECT produce_bytes_per_sec, produce_messages_per_sec, fetch_bytes_per_sec, reason,
		created_by, created_at, expires_at FROM tenant_throttles WHERE tenant_id = $1 AND expires_at > now()`, id).
		Scan(&t.ProduceBytesPerSec, &t.ProduceMessagesPerSec, &t.FetchBytesPerSec, &t.Reason, &t.CreatedBy, &t.CreatedAt, &t.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, catalog.NotFound.New("the tenant has no throttle (or no such tenant)")
	}
	if err != nil {
		return t, dbError("load throttle", err)
	}
	err = s.db.QueryRow(ctx, `SELECT `+quotaColumns+` FROM effective_quotas WHERE tenant_id = $1`, id).Scan(quotaFields(&t.Effective)...)
	if err != nil {
		return t, dbError("load effective quotas", err)
	}
	return t, nil
}

// expireThrottles deletes the throttles that expired and bumps their
// tenants' cells, so the brokers get the tenants' own quotas back. The
// cell-state long poll calls it on every tick: the revert needs no
// operator and no worker of its own, only a broker polling (which every
// broker always is). Concurrent callers delete each row once.
func (s *Server) expireThrottles(ctx context.Context) error {
	var due bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenant_throttles WHERE expires_at <= now())`).Scan(&due); err != nil || !due {
		return err
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM tenant_throttles WHERE expires_at <= now() RETURNING tenant_id`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := bumpTenantCell(ctx, tx, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO audit_log (tenant_id, actor, action, target, detail) VALUES ($1, 'system', 'tenant.throttle_expired', $1, '{}')`, id); err != nil {
				return err
			}
		}
		return nil
	})
}
