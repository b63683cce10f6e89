-- +goose Up
-- The scheme of a broker's HTTP data API as the broker reports it ("https"
-- when it serves TLS), so /v1/cluster lists the endpoints clients can use.
-- Brokers that have not reported one serve plain HTTP.
ALTER TABLE brokers ADD COLUMN http_scheme text NOT NULL DEFAULT 'http'
    CHECK (http_scheme IN ('http', 'https'));

-- +goose Down
ALTER TABLE brokers DROP COLUMN http_scheme;
