-- +goose Up
-- Brokers authenticate to the internal cell API with a cell key: an id and a
-- secret stored only as a hash.
CREATE TABLE cell_keys (
    id          text PRIMARY KEY,
    cell_id     text NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    secret_hash bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- What each broker last reported about each of its partition replicas.
CREATE TABLE partition_status (
    topic_id         text NOT NULL,
    partition        integer NOT NULL,
    broker_id        text NOT NULL REFERENCES brokers(id) ON DELETE CASCADE,
    leader_node      integer NOT NULL,
    leader_epoch     bigint NOT NULL,
    log_start_offset bigint NOT NULL,
    log_end_offset   bigint NOT NULL,
    high_watermark   bigint NOT NULL,
    size_bytes       bigint NOT NULL,
    reported_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition, broker_id),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions(topic_id, partition) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE partition_status, cell_keys;
