-- +goose Up
-- POST /v1/members invites: it answers alike whether or not the address
-- has an account (or is a member already), and mails the address a token;
-- POST /v1/invitations/accept with it adds the membership, making the user
-- with the inviter's initial password when the address has no account.
-- The token is stored hashed, the password as its argon2id hash.
CREATE TABLE member_invitations (
    token_hash    bytea PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    email         text NOT NULL,
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    password_hash text NOT NULL,
    invited_by    text NOT NULL,
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX member_invitations_expires ON member_invitations (expires_at);

-- +goose Down
DROP TABLE member_invitations;
