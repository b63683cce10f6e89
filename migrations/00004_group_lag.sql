-- +goose Up
-- The lag of each consumer group's committed offsets, as the group's
-- coordinator broker last reported it. A coordinator reports all of its
-- groups every time, so a broker's rows missing from its newest report (a
-- deleted group, or one another broker now coordinates) are deleted then;
-- rows of deleted topics, partitions, tenants, cells and brokers go with
-- them.
CREATE TABLE group_lag (
    cell_id            text NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    tenant_id          text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    group_name         text NOT NULL,
    topic_id           text NOT NULL,
    partition          integer NOT NULL,
    broker_id          text NOT NULL REFERENCES brokers(id) ON DELETE CASCADE,
    committed_offset   bigint NOT NULL,
    committed_at       timestamptz,
    measured           boolean NOT NULL,
    high_watermark     bigint NOT NULL,
    log_start_offset   bigint NOT NULL,
    lag_records        bigint NOT NULL,
    lag_bytes          bigint NOT NULL,
    lag_seconds        double precision NOT NULL,
    retention_fraction double precision NOT NULL,
    expired            boolean NOT NULL,
    reported_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cell_id, tenant_id, group_name, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions(topic_id, partition) ON DELETE CASCADE
);
CREATE INDEX group_lag_tenant ON group_lag (tenant_id, group_name);
CREATE INDEX group_lag_broker ON group_lag (broker_id);
CREATE INDEX group_lag_topic ON group_lag (topic_id, partition);

-- +goose Down
DROP TABLE group_lag;
