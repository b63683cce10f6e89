-- +goose Up
-- A signup waits here until its confirmation token, mailed to the address,
-- comes back (POST /v1/signup/confirm): signup answers every request the
-- same way, so only the address's owner learns whether it could sign up.
-- The token is stored hashed; the password as its argon2id hash.
CREATE TABLE signup_requests (
    token_hash    bytea PRIMARY KEY,
    email         text NOT NULL,
    tenant_name   text NOT NULL,
    plan          text NOT NULL,
    password_hash text NOT NULL,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signup_requests_expires ON signup_requests (expires_at);

-- +goose Down
DROP TABLE signup_requests;
