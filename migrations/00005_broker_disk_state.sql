-- +goose Up
-- Each broker reports its data disk against its watermarks. While any broker
-- of a cell is above its soft watermark, no partitions are placed on the
-- cell and signup picks another cell.
ALTER TABLE brokers ADD COLUMN disk_state text NOT NULL DEFAULT 'ok'
    CHECK (disk_state IN ('ok', 'soft', 'hard'));

-- +goose Down
ALTER TABLE brokers DROP COLUMN disk_state;
