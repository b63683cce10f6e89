-- +goose Up
-- A replica move changes one partition's replica set from original to
-- target. The control plane only publishes the move in the cell state
-- (replicas = target ∪ original, adding, removing); the partition's leader
-- converges its Raft configuration and reports it, and the report that
-- shows the goal reached (voters = target, or original once cancelling,
-- and no non-voters) finishes the move. partitions.replicas keeps the
-- original until the move completes.
CREATE TABLE partition_moves (
    id          bigserial PRIMARY KEY,
    cell_id     text NOT NULL REFERENCES cells(id),
    -- a topic's id, or '__offsets' for one of the cell's consumer-group
    -- offsets partitions (offsets_placements).
    topic_id    text NOT NULL,
    partition   integer NOT NULL,
    original    integer[] NOT NULL,
    target      integer[] NOT NULL,
    state       text NOT NULL DEFAULT 'running'
        CHECK (state IN ('running', 'completed', 'cancelling', 'cancelled', 'failed')),
    -- why the move was made: "" for one asked for by itself, else what
    -- made it (a broker drain).
    reason      text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    -- The leader's last report on the partition: its Raft configuration
    -- and how far each joining replica is behind (JSON of wire.JoinStatus).
    voters          integer[],
    nonvoters       integer[],
    joining         jsonb NOT NULL DEFAULT '[]',
    bytes_remaining bigint,
    progress_at     timestamptz,
    -- bytes_remaining's fall per second between the last two leader
    -- reports that lowered it; the ETA is bytes_remaining / it.
    bytes_per_sec   double precision NOT NULL DEFAULT 0,
    -- A topic partition's moves go with the topic; an offsets
    -- partition's have no row in partitions.
    partition_topic_id text GENERATED ALWAYS AS (CASE WHEN topic_id = '__offsets' THEN NULL ELSE topic_id END) STORED,
    FOREIGN KEY (partition_topic_id, partition) REFERENCES partitions(topic_id, partition) ON DELETE CASCADE,
    CHECK ((state IN ('running', 'cancelling')) = (finished_at IS NULL))
);
-- At most one unfinished move per partition.
CREATE UNIQUE INDEX partition_moves_unfinished ON partition_moves (cell_id, topic_id, partition)
    WHERE state IN ('running', 'cancelling');
CREATE INDEX partition_moves_cell ON partition_moves (cell_id, id);

-- The placement of a cell's consumer-group offsets partitions once the
-- control plane has taken it over (to move one off a drained broker).
-- Until then a cell has no rows and every broker computes the placement
-- itself: n partitions over the cell's three lowest node ids, rotated by
-- partition (dataplane/replicas.OffsetsPlacement); the take-over starts
-- from exactly that, with n the control plane's OffsetsPartitions, which
-- must be what every broker of the cell runs with.
CREATE TABLE offsets_placements (
    cell_id   text NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
    partition integer NOT NULL CHECK (partition >= 0),
    replicas  integer[] NOT NULL,
    PRIMARY KEY (cell_id, partition)
);

-- Whether the broker's last report carried the Raft configuration of every
-- replica it holds (wire.PartitionStatus.Voters): moves start only in a
-- cell whose live brokers all do, since a broker that does not ignores
-- a move.
ALTER TABLE brokers ADD COLUMN reports_voters boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE brokers DROP COLUMN reports_voters;
DROP TABLE offsets_placements, partition_moves;
