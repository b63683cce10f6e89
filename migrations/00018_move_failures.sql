-- +goose Up
-- A move fails when the control plane sees it cannot reach its target as
-- things stand (a new replica's broker offline, draining or silent, no
-- leader of the partition reporting): failure says why. A failed move is
-- still unfinished: it stays published as running (a cause that clears
-- lets it complete), keeps other moves of its partition out, and an
-- operator cancels it to roll it back.
ALTER TABLE partition_moves ADD COLUMN failure text NOT NULL DEFAULT '';
ALTER TABLE partition_moves DROP CONSTRAINT partition_moves_check;
ALTER TABLE partition_moves ADD CONSTRAINT partition_moves_finished
    CHECK ((state IN ('running', 'cancelling', 'failed')) = (finished_at IS NULL));
DROP INDEX partition_moves_unfinished;
CREATE UNIQUE INDEX partition_moves_unfinished ON partition_moves (cell_id, topic_id, partition)
    WHERE state IN ('running', 'cancelling', 'failed');

-- +goose Down
DROP INDEX partition_moves_unfinished;
CREATE UNIQUE INDEX partition_moves_unfinished ON partition_moves (cell_id, topic_id, partition)
    WHERE state IN ('running', 'cancelling');
UPDATE partition_moves SET state = 'cancelling' WHERE state = 'failed';
ALTER TABLE partition_moves DROP CONSTRAINT partition_moves_finished;
ALTER TABLE partition_moves ADD CONSTRAINT partition_moves_check
    CHECK ((state IN ('running', 'cancelling')) = (finished_at IS NULL));
ALTER TABLE partition_moves DROP COLUMN failure;
