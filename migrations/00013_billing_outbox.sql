-- +goose Up
-- Stripe reporting: a customer per tenant, a billing meter per Sluice
-- meter, and an outbox of meter events, one per (tenant, meter, closed
-- hour) with a deterministic identifier, so that a retry or a restart
-- sends the same event again (Stripe keeps one per identifier) and never
-- another one for the hour.
CREATE TABLE billing_customers (
    tenant_id          text PRIMARY KEY,
    stripe_customer_id text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE billing_meters (
    meter           text PRIMARY KEY,
    event_name      text NOT NULL UNIQUE,
    stripe_meter_id text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE billing_outbox (
    tenant_id       text NOT NULL,
    meter           text NOT NULL,
    hour            timestamptz NOT NULL,
    -- The ledger's value when the hour was closed; usage the ledger gets
    -- later is reported by `tenantd admin billing reconcile`.
    value           bigint NOT NULL CHECK (value >= 0),
    identifier      text NOT NULL UNIQUE,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text NOT NULL DEFAULT '',
    sent_at         timestamptz,
    PRIMARY KEY (tenant_id, meter, hour)
);
CREATE INDEX billing_outbox_pending ON billing_outbox (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP TABLE billing_outbox;
DROP TABLE billing_meters;
DROP TABLE billing_customers;
