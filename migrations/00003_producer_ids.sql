-- +goose Up
-- Producer ids for idempotent Kafka producers are unique across the whole
-- platform; brokers take them from this sequence in blocks.
CREATE SEQUENCE producer_ids AS bigint MINVALUE 1000 START WITH 1000;

-- +goose Down
DROP SEQUENCE producer_ids;
