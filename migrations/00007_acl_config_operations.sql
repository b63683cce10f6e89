-- +goose Up
-- ACLs gain Kafka's describe_configs and alter_configs operations.
ALTER TABLE acls DROP CONSTRAINT acls_operation_check;
ALTER TABLE acls ADD CONSTRAINT acls_operation_check
    CHECK (operation IN ('all', 'read', 'write', 'create', 'delete', 'describe', 'alter', 'describe_configs', 'alter_configs'));

-- +goose Down
DELETE FROM acls WHERE operation IN ('describe_configs', 'alter_configs');
ALTER TABLE acls DROP CONSTRAINT acls_operation_check;
ALTER TABLE acls ADD CONSTRAINT acls_operation_check
    CHECK (operation IN ('all', 'read', 'write', 'create', 'delete', 'describe', 'alter'));
