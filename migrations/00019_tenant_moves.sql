-- +goose Up
-- A tenant move copies every partition of a tenant from its home cell (the
-- source) to a cell of another pool (the destination), then hands the
-- tenant over (contract/wire/tenantmove.go has the five steps). The
-- control plane derives both cells' states from the move row; the brokers'
-- reports advance it:
--   mirroring → fencing → promoting → switching → offsets → done,
-- or, before promoting, → cancelled.
CREATE TABLE tenant_moves (
    id             bigserial PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    source_cell_id text NOT NULL REFERENCES cells(id),
    dest_cell_id   text NOT NULL REFERENCES cells(id),
    -- the pool the tenant joins when its home switches.
    dest_pool_id   text NOT NULL REFERENCES pools(id),
    state          text NOT NULL DEFAULT 'mirroring' CHECK (state IN
        ('mirroring', 'fencing', 'promoting', 'switching', 'offsets', 'done', 'cancelled')),
    -- the source cell's state version that first dropped the tenant; its
    -- brokers' reports at or past it carry the tenant's final offsets.
    switch_version bigint,
    -- the source brokers that reported at or past switch_version.
    switch_acked   text[] NOT NULL DEFAULT '{}',
    -- the tenant's final committed offsets on the source (JSON of
    -- wire.CommittedOffset), published to the destination in step offsets.
    group_offsets  jsonb NOT NULL DEFAULT '[]',
    -- the destination's offsets partitions that acknowledged them.
    offsets_imported integer[] NOT NULL DEFAULT '{}',
    -- the last thing that holds the move back, as the control plane saw it.
    error          text NOT NULL DEFAULT '',
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CHECK (source_cell_id <> dest_cell_id),
    CHECK ((state IN ('done', 'cancelled')) = (finished_at IS NOT NULL))
);
-- At most one unfinished move per tenant.
CREATE UNIQUE INDEX tenant_moves_unfinished ON tenant_moves (tenant_id) WHERE state NOT IN ('done', 'cancelled');
CREATE INDEX tenant_moves_source ON tenant_moves (source_cell_id) WHERE state NOT IN ('done', 'cancelled');
CREATE INDEX tenant_moves_dest ON tenant_moves (dest_cell_id) WHERE state NOT IN ('done', 'cancelled');

-- The destination placement of each partition of a moving tenant, and what
-- its leaders last reported. partitions keeps one row per topic partition
-- with the cell that serves it (the source, until the switch): keyhome,
-- partition_status, group_lag and replica moves all key on it, and every
-- one of them must keep meaning the tenant's home until the switch. So the
-- destination's replicas live here beside it, and the switch copies them
-- into partitions in the transaction that changes the tenant's home.
CREATE TABLE tenant_move_partitions (
    move_id    bigint NOT NULL REFERENCES tenant_moves(id) ON DELETE CASCADE,
    topic_id   text NOT NULL,
    partition  integer NOT NULL,
    replicas   integer[] NOT NULL,  -- destination node ids; the first is the preferred leader
    -- the destination leader's last MirrorStatus
    mirroring  boolean NOT NULL DEFAULT false,
    lag        bigint,
    promoted   boolean NOT NULL DEFAULT false,
    mirror_error text NOT NULL DEFAULT '',
    mirror_at  timestamptz,
    -- the source leader's last MirrorStatus
    fenced     boolean NOT NULL DEFAULT false,
    fenced_end bigint,
    fenced_at  timestamptz,
    PRIMARY KEY (move_id, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions(topic_id, partition) ON DELETE CASCADE
);

-- A cell's peer CA: the Raft transport CA its brokers register
-- (wire.Registration.PeerCA), published to the other cell of a move.
ALTER TABLE cells ADD COLUMN peer_ca text NOT NULL DEFAULT '';
-- Whether the broker's last report said it takes part in tenant moves
-- (wire.Report.Moves): a move starts only between cells whose live brokers
-- all do.
ALTER TABLE brokers ADD COLUMN reports_moves boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE brokers DROP COLUMN reports_moves;
ALTER TABLE cells DROP COLUMN peer_ca;
DROP TABLE tenant_move_partitions, tenant_moves;
