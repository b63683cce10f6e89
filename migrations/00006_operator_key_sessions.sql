-- +goose Up
-- An operator signs in to the console with an operator API key: that
-- session belongs to the key, not to a user, and stops working when the key
-- is revoked, expires or is deleted.
ALTER TABLE sessions ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE sessions ADD COLUMN api_key_id text REFERENCES api_keys(id) ON DELETE CASCADE;
ALTER TABLE sessions ADD CONSTRAINT sessions_one_subject CHECK ((user_id IS NULL) <> (api_key_id IS NULL));

-- +goose Down
DELETE FROM sessions WHERE api_key_id IS NOT NULL;
ALTER TABLE sessions DROP CONSTRAINT sessions_one_subject;
ALTER TABLE sessions DROP COLUMN api_key_id;
ALTER TABLE sessions ALTER COLUMN user_id SET NOT NULL;
