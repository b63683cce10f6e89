-- +goose Up
-- Stripe keeps a meter event's identifier (and the idempotency key) for
-- 24 hours. A pending event first sent longer ago than that may be in
-- Stripe already, and a resend would not be recognised: the worker checks
-- Stripe's summary of the hour instead, and holds the event ('held') when
-- that does not settle it. first_attempt_at is when the first request that
-- may have reached Stripe left; NULL while none has.
ALTER TABLE billing_outbox ADD COLUMN first_attempt_at timestamptz;
ALTER TABLE billing_outbox DROP CONSTRAINT billing_outbox_state_check;
ALTER TABLE billing_outbox ADD CONSTRAINT billing_outbox_state_check CHECK (state IN ('pending', 'sent', 'held'));
-- Rows attempted before this column: their first attempt was no earlier
-- than the end of their hour, the earliest (so the safest) guess.
UPDATE billing_outbox SET first_attempt_at = hour + interval '1 hour' WHERE state = 'pending' AND attempts > 0;

-- +goose Down
UPDATE billing_outbox SET state = 'pending' WHERE state = 'held';
ALTER TABLE billing_outbox DROP CONSTRAINT billing_outbox_state_check;
ALTER TABLE billing_outbox ADD CONSTRAINT billing_outbox_state_check CHECK (state IN ('pending', 'sent'));
ALTER TABLE billing_outbox DROP COLUMN first_attempt_at;
