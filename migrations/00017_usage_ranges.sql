-- +goose Up
-- Produce metering from the partitions' replicated logs: each partition's
-- leader records closed produce ranges, each naming its end offset and the
-- cumulative bytes and messages of one hour up to it. Per (topic,
-- partition, hour) the ledger keeps the range with the highest end offset
-- it applied; a range with a higher end adds the difference to
-- usage_ledger in the same transaction, any other (a range recorded again
-- after a leader change) adds nothing.
CREATE TABLE usage_ranges (
    topic_id   text NOT NULL,
    partition  integer NOT NULL CHECK (partition >= 0),
    hour       timestamptz NOT NULL CHECK (date_trunc('hour', hour) = hour),
    end_offset bigint NOT NULL,
    bytes      bigint NOT NULL CHECK (bytes >= 0),
    messages   bigint NOT NULL CHECK (messages >= 0),
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition, hour)
);
CREATE INDEX usage_ranges_hour ON usage_ranges (hour);

-- +goose Down
DROP TABLE usage_ranges;
