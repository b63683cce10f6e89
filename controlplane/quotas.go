package controlplane

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// Plans and their default quotas. A tenant's quotas start from its plan's and
// operators may change them.
var plans = map[string]api.Quotas{
	"free": {
		ProduceBytesPerSec: 1 << 20, ProduceMessagesPerSec: 1_000, FetchBytesPerSec: 2 << 20,
		MaxPartitions: 30, MaxTopics: 10, MaxConnections: 50, MaxStorageBytes: 5 << 30,
		MaxMessageBytes: 1 << 20, MaxRequestsPerSec: 200, MaxRetentionMs: 7 * 24 * 3600 * 1000,
	},
	"standard": {
		ProduceBytesPerSec: 10 << 20, ProduceMessagesPerSec: 20_000, FetchBytesPerSec: 30 << 20,
		MaxPartitions: 300, MaxTopics: 100, MaxConnections: 1_000, MaxStorageBytes: 500 << 30,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 2_000, MaxRetentionMs: 30 * 24 * 3600 * 1000,
	},
	"dedicated": {
		ProduceBytesPerSec: 100 << 20, ProduceMessagesPerSec: 200_000, FetchBytesPerSec: 300 << 20,
		MaxPartitions: 3_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 10 << 40,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 20_000, MaxRetentionMs: 365 * 24 * 3600 * 1000,
	},
}

const quotaColumns = `produce_bytes_per_sec, produce_messages_per_sec, fetch_bytes_per_sec, max_partitions,
	max_topics, max_connections, max_storage_bytes, max_message_bytes, max_requests_per_sec, max_retention_ms, updated_at`

func quotaFields(q *api.Quotas) []any {
	return []any{&q.ProduceBytesPerSec, &q.ProduceMessagesPerSec, &q.FetchBytesPerSec, &q.MaxPartitions,
		&q.MaxTopics, &q.MaxConnections, &q.MaxStorageBytes, &q.MaxMessageBytes, &q.MaxRequestsPerSec,
		&q.MaxRetentionMs, &q.UpdatedAt}
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func loadQuotas(ctx context.Context, q querier, tenantID string) (api.Quotas, error) {
	var out api.Quotas
	err := q.QueryRow(ctx, `SELECT `+quotaColumns+` FROM quotas WHERE tenant_id = $1`, tenantID).Scan(quotaFields(&out)...)
	return out, err
}

func storeQuotas(ctx context.Context, tx pgx.Tx, tenantID string, q api.Quotas) error {
	_, err := tx.Exec(ctx, `INSERT INTO quotas (tenant_id, produce_bytes_per_sec, produce_messages_per_sec,
		fetch_bytes_per_sec, max_partitions, max_topics, max_connections, max_storage_bytes, max_message_bytes,
		max_requests_per_sec, max_retention_ms, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
		ON CONFLICT (tenant_id) DO UPDATE SET produce_bytes_per_sec = $2, produce_messages_per_sec = $3,
		fetch_bytes_per_sec = $4, max_partitions = $5, max_topics = $6, max_connections = $7,
		max_storage_bytes = $8, max_message_bytes = $9, max_requests_per_sec = $10, max_retention_ms = $11,
		updated_at = now()`,
		tenantID, q.ProduceBytesPerSec, q.ProduceMessagesPerSec, q.FetchBytesPerSec, q.MaxPartitions,
		q.MaxTopics, q.MaxConnections, q.MaxStorageBytes, q.MaxMessageBytes, q.MaxRequestsPerSec, q.MaxRetentionMs)
	return err
}

func validateQuotas(q api.Quotas) error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"produce_bytes_per_sec", q.ProduceBytesPerSec}, {"produce_messages_per_sec", q.ProduceMessagesPerSec},
		{"fetch_bytes_per_sec", q.FetchBytesPerSec}, {"max_partitions", int64(q.MaxPartitions)},
		{"max_topics", int64(q.MaxTopics)}, {"max_connections", int64(q.MaxConnections)},
		{"max_storage_bytes", q.MaxStorageBytes}, {"max_message_bytes", int64(q.MaxMessageBytes)},
		{"max_requests_per_sec", int64(q.MaxRequestsPerSec)}, {"max_retention_ms", q.MaxRetentionMs},
	} {
		if f.v <= 0 {
			return catalog.InvalidRequest.Newf("%s must be greater than 0", f.name)
		}
	}
	if q.MaxMessageBytes > 64<<20 {
		return catalog.InvalidRequest.New("max_message_bytes may be at most 64 MiB")
	}
	return nil
}

func (s *Server) getQuotas(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjQuotas, authz.ActRead)
	if err != nil {
		return err
	}
	q, err := loadQuotas(c.Request().Context(), s.db, p.tenantID)
	if err != nil {
		return dbError("load quotas", err)
	}
	return c.JSON(http.StatusOK, q)
}

func (s *Server) adminGetQuotas(c echo.Context) error {
	return operatorGet(s, c, func(ctx context.Context, tenantID string) (api.Quotas, error) {
		q, err := loadQuotas(ctx, s.db, tenantID)
		if err != nil {
			return q, dbError("load quotas", err)
		}
		return q, nil
	})
}

func (s *Server) adminSetQuotas(c echo.Context) error {
	p, q, err := operatorWrite[api.Quotas](s, c)
	if err != nil {
		return err
	}
	if err := validateQuotas(q); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenantID := c.Param("id")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT true FROM tenants WHERE id = $1`, tenantID).Scan(&exists); err != nil {
			return err
		}
		if err := storeQuotas(ctx, tx, tenantID, q); err != nil {
			return err
		}
		return bumpAndAudit(ctx, tx, tenantID, p, "quotas.set", tenantID, map[string]any{"quotas": q})
	})
	if err != nil {
		return dbError("set quotas", err)
	}
	out, err := loadQuotas(ctx, s.db, tenantID)
	if err != nil {
		return dbError("load quotas", err)
	}
	return c.JSON(http.StatusOK, out)
}
