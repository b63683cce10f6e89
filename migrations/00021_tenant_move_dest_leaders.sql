-- +goose Up
-- The destination leader's last report of each moving partition, kept
-- beside its mirror status: until the switch the partitions belong to the
-- source cell, so the destination's reports do not reach partition_status.
-- The switch copies these rows there, so Metadata redirected to the new
-- home names each partition's leader and epoch at once instead of after
-- the destination brokers' next reports.
ALTER TABLE tenant_move_partitions
    ADD COLUMN dest_broker_id    text,
    ADD COLUMN dest_leader_epoch bigint,
    ADD COLUMN dest_log_start    bigint,
    ADD COLUMN dest_log_end      bigint,
    ADD COLUMN dest_hw           bigint,
    ADD COLUMN dest_size         bigint;

-- +goose Down
ALTER TABLE tenant_move_partitions
    DROP COLUMN dest_broker_id,
    DROP COLUMN dest_leader_epoch,
    DROP COLUMN dest_log_start,
    DROP COLUMN dest_log_end,
    DROP COLUMN dest_hw,
    DROP COLUMN dest_size;
