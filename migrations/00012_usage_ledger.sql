-- +goose Up
-- The billing ledger: what the brokers metered, by tenant, topic, meter
-- and hour. Brokers flush usage records into their cell's usage
-- partitions; the usage partitions' leaders ship them here. A shipment is
-- applied in one transaction with the position it moves (usage_positions),
-- and each record's source (broker node, boot id, sequence) is applied once
-- (usage_sources), so neither a retried shipment nor a retried flush counts
-- twice.
CREATE TABLE usage_ledger (
    tenant_id text NOT NULL,
    -- '' for usage not attributed to one topic (an HTTP group fetch).
    -- Topic ids, not names: usage outlives a deleted topic.
    topic_id  text NOT NULL DEFAULT '',
    -- partition_seconds and storage_byte_seconds are sampled from the
    -- partitions' leaders: partition-hours and byte-hours times 3,600.
    meter     text NOT NULL CHECK (meter IN ('bytes_in', 'bytes_out', 'messages_in', 'messages_out',
                                             'partition_seconds', 'storage_byte_seconds')),
    hour      timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    value     bigint NOT NULL CHECK (value >= 0),
    PRIMARY KEY (tenant_id, meter, hour, topic_id)
);
CREATE INDEX usage_ledger_hour ON usage_ledger (hour);

-- How far each usage partition of each cell has been applied: the offset
-- after the last applied record.
CREATE TABLE usage_positions (
    cell_id     text NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cell_id, partition)
);

-- Usage records applied, by source. Rows older than the usage partitions'
-- retention can go: no copy of their record is left to ship again.
CREATE TABLE usage_sources (
    node       integer NOT NULL,
    boot       text NOT NULL,
    seq        bigint NOT NULL,
    cell_id    text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cell_id, node, boot, seq)
);
CREATE INDEX usage_sources_applied ON usage_sources (applied_at);

-- Produced batches counted, by topic id, partition and base offset: a
-- batch is counted once although the leader that appended it and a later
-- one that answered its producer's retry as a duplicate both report it.
CREATE TABLE usage_batches (
    topic_id    text NOT NULL,
    partition   integer NOT NULL,
    base_offset bigint NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition, base_offset)
);
CREATE INDEX usage_batches_applied ON usage_batches (applied_at);

-- +goose Down
DROP TABLE usage_batches;
DROP TABLE usage_sources;
DROP TABLE usage_positions;
DROP TABLE usage_ledger;
