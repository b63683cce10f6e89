-- +goose Up
-- A temporary quota an operator puts on a hot tenant (tenantd admin
-- tenants throttle): each rate, when set, caps the tenant's quota until
-- expires_at, after which the tenant's own quotas apply again. The cell
-- state serves effective_quotas, so the throttle reaches the brokers like
-- a quota change, and the control plane deletes an expired throttle and
-- bumps the cell's state version (the revert reaches them the same way).
CREATE TABLE tenant_throttles (
    tenant_id                text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    produce_bytes_per_sec    bigint CHECK (produce_bytes_per_sec > 0),
    produce_messages_per_sec bigint CHECK (produce_messages_per_sec > 0),
    fetch_bytes_per_sec      bigint CHECK (fetch_bytes_per_sec > 0),
    reason                   text NOT NULL DEFAULT '',
    created_by               text NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    expires_at               timestamptz NOT NULL,
    CHECK (produce_bytes_per_sec IS NOT NULL OR produce_messages_per_sec IS NOT NULL OR fetch_bytes_per_sec IS NOT NULL)
);
CREATE INDEX tenant_throttles_expires ON tenant_throttles (expires_at);

-- The quotas brokers enforce: a tenant's own, each rate capped by an
-- unexpired throttle (least ignores a NULL, i.e. a rate the throttle
-- leaves alone).
CREATE VIEW effective_quotas AS
SELECT q.tenant_id,
    least(q.produce_bytes_per_sec, t.produce_bytes_per_sec) AS produce_bytes_per_sec,
    least(q.produce_messages_per_sec, t.produce_messages_per_sec) AS produce_messages_per_sec,
    least(q.fetch_bytes_per_sec, t.fetch_bytes_per_sec) AS fetch_bytes_per_sec,
    q.max_partitions, q.max_topics, q.max_connections, q.max_storage_bytes, q.max_message_bytes,
    q.max_requests_per_sec, q.max_retention_ms,
    greatest(q.updated_at, t.created_at) AS updated_at
FROM quotas q
LEFT JOIN tenant_throttles t ON t.tenant_id = q.tenant_id AND t.expires_at > now();

-- +goose Down
DROP VIEW effective_quotas;
DROP TABLE tenant_throttles;
