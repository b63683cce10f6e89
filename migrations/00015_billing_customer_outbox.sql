-- +goose Up
-- The Stripe customers to create: signup confirmation enqueues its new
-- tenant here in its own transaction, and the billing worker creates the
-- customer (billing_customers) when Stripe answers, retrying with backoff,
-- so a Stripe outage never blocks a signup.
CREATE TABLE billing_customer_outbox (
    tenant_id       text PRIMARY KEY,
    name            text NOT NULL,
    email           text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'created')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text NOT NULL DEFAULT '',
    enqueued_at     timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz
);
CREATE INDEX billing_customer_outbox_pending ON billing_customer_outbox (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP TABLE billing_customer_outbox;
