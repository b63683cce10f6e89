-- +goose Up
-- The control plane's source of truth. Migrations are append-only: once a file
-- has shipped it is never edited; changes go in a new numbered file.

CREATE TABLE pools (
    id          text PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('shared', 'dedicated')),
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE cells (
    id            text PRIMARY KEY,
    pool_id       text NOT NULL REFERENCES pools(id),
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'draining', 'offline')),
    -- state_version grows with every change to the desired state of the cell
    -- (tenants, keys, ACLs, quotas, topics); brokers long-poll on it.
    state_version bigint NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE brokers (
    id          text PRIMARY KEY,
    cell_id     text NOT NULL REFERENCES cells(id),
    node_id     integer NOT NULL CHECK (node_id > 0),
    kafka_addr  text NOT NULL DEFAULT '',
    http_addr   text NOT NULL DEFAULT '',
    raft_addr   text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'draining', 'offline')),
    disk_used_bytes  bigint NOT NULL DEFAULT 0,
    disk_total_bytes bigint NOT NULL DEFAULT 0,
    last_seen_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (cell_id, node_id)
);

CREATE TABLE tenants (
    id           text PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    plan         text NOT NULL CHECK (plan IN ('free', 'standard', 'dedicated')),
    status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    pool_id      text NOT NULL REFERENCES pools(id),
    home_cell_id text NOT NULL REFERENCES cells(id),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tenants_home_cell ON tenants (home_cell_id);

CREATE TABLE users (
    id            text PRIMARY KEY,
    email         text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    is_operator   boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    user_id    text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tenant_id  text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, tenant_id)
);
CREATE INDEX memberships_tenant ON memberships (tenant_id);

CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tenant_id  text REFERENCES tenants(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- API keys: the secret is stored only as a hash. tenant_id is NULL for
-- platform-operator keys.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    tenant_id    text REFERENCES tenants(id) ON DELETE CASCADE,
    secret_hash  bytea NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer', 'client', 'operator')),
    description  text NOT NULL DEFAULT '',
    created_by   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    CHECK ((tenant_id IS NULL) = (role = 'operator'))
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

CREATE TABLE acls (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    principal     text NOT NULL,   -- an API key id of the tenant, or '*' for all of them
    resource_type text NOT NULL CHECK (resource_type IN ('topic', 'group', 'cluster')),
    resource_name text NOT NULL,
    pattern_type  text NOT NULL CHECK (pattern_type IN ('literal', 'prefixed')),
    operation     text NOT NULL CHECK (operation IN ('all', 'read', 'write', 'create', 'delete', 'describe', 'alter')),
    permission    text NOT NULL CHECK (permission IN ('allow', 'deny')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, principal, resource_type, resource_name, pattern_type, operation, permission)
);

CREATE TABLE quotas (
    tenant_id                 text PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    produce_bytes_per_sec     bigint NOT NULL CHECK (produce_bytes_per_sec > 0),
    produce_messages_per_sec  bigint NOT NULL CHECK (produce_messages_per_sec > 0),
    fetch_bytes_per_sec       bigint NOT NULL CHECK (fetch_bytes_per_sec > 0),
    max_partitions            integer NOT NULL CHECK (max_partitions > 0),
    max_topics                integer NOT NULL CHECK (max_topics > 0),
    max_connections           integer NOT NULL CHECK (max_connections > 0),
    max_storage_bytes         bigint NOT NULL CHECK (max_storage_bytes > 0),
    max_message_bytes         integer NOT NULL CHECK (max_message_bytes > 0),
    max_requests_per_sec      integer NOT NULL CHECK (max_requests_per_sec > 0),
    max_retention_ms          bigint NOT NULL CHECK (max_retention_ms > 0),
    updated_at                timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE topics (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name        text NOT NULL,
    partitions  integer NOT NULL CHECK (partitions > 0),
    replication_factor integer NOT NULL CHECK (replication_factor > 0),
    config      jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE partitions (
    topic_id  text NOT NULL REFERENCES topics(id) ON DELETE CASCADE,
    partition integer NOT NULL CHECK (partition >= 0),
    cell_id   text NOT NULL REFERENCES cells(id),
    replicas  integer[] NOT NULL,  -- broker node ids; the first is the preferred leader
    PRIMARY KEY (topic_id, partition)
);
CREATE INDEX partitions_cell ON partitions (cell_id);

CREATE TABLE audit_log (
    id        bigserial PRIMARY KEY,
    tenant_id text,
    actor     text NOT NULL,
    action    text NOT NULL,
    target    text NOT NULL DEFAULT '',
    detail    jsonb NOT NULL DEFAULT '{}',
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id);

-- +goose Down
DROP TABLE audit_log, partitions, topics, quotas, acls, api_keys, sessions,
    memberships, users, tenants, brokers, cells, pools;
