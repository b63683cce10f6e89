-- +goose Up
-- API keys gain SCRAM-SHA-256 and SCRAM-SHA-512 credentials (salt,
-- iteration count, StoredKey, ServerKey per mechanism), derived from the
-- secret when the key is created; the secret itself is never stored. Keys
-- created before this migration have none (NULL): they sign in with PLAIN,
-- or a new key is made.
ALTER TABLE api_keys ADD COLUMN scram_credentials jsonb;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN scram_credentials;
