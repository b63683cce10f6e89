-- +goose Up
-- The most a tenant move copies from its source cell a second, over all
-- its partitions; the control plane gives each destination partition an
-- equal share (wire.TopicMirror.BytesPerSec). 0 leaves each partition at
-- its destination brokers' -mirror-rate.
ALTER TABLE tenant_moves
    ADD COLUMN bytes_per_sec bigint NOT NULL DEFAULT 0 CHECK (bytes_per_sec >= 0);
-- The rate limit the destination leader's puller applies, as it last
-- reported it while mirroring (0: unlimited); NULL before any report.
ALTER TABLE tenant_move_partitions ADD COLUMN mirror_bytes_per_sec bigint;

-- +goose Down
ALTER TABLE tenant_move_partitions DROP COLUMN mirror_bytes_per_sec;
ALTER TABLE tenant_moves DROP COLUMN bytes_per_sec;
