package controlplane

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/catalog"
)

// replicationFactor is the number of replicas of every partition: the three
// brokers of a cell.
const replicationFactor = 3

// placePartitions assigns partitions [from, to) of a topic to the brokers of
// cell. Replica lists rotate through the cell's brokers, starting after the
// partitions the cell already holds, so preferred leaders (the first replica)
// spread evenly across brokers. While a broker of the cell reports its disk
// above the soft watermark nothing is placed (CellDiskPressure).
func placePartitions(ctx context.Context, tx pgx.Tx, cell, topicID string, from, to int) (int, error) {
	var full, state string
	err := tx.QueryRow(ctx, `SELECT id, disk_state FROM brokers WHERE cell_id = $1 AND status = 'active' AND disk_state <> 'ok'
		ORDER BY id LIMIT 1`, cell).Scan(&full, &state)
	switch {
	case err == nil:
		return 0, catalog.CellDiskPressure.Newf("broker %s of the tenant's cell is above its %s disk watermark: no partitions are placed on the cell until its disk use falls; retry later", full, state)
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, err
	}
	rows, err := tx.Query(ctx, `SELECT node_id FROM brokers WHERE cell_id = $1 AND status = 'active' ORDER BY node_id`, cell)
	if err != nil {
		return 0, err
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return 0, err
	}
	if len(nodes) == 0 {
		return 0, catalog.NoCapacity.New("the tenant's cell has no active brokers yet; try again later")
	}
	rf := min(replicationFactor, len(nodes))
	var start int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM partitions WHERE cell_id = $1`, cell).Scan(&start); err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	for p := from; p < to; p++ {
		replicas := make([]int, rf)
		for i := range replicas {
			replicas[i] = nodes[(start+p-from+i)%len(nodes)]
		}
		batch.Queue(`INSERT INTO partitions (topic_id, partition, cell_id, replicas) VALUES ($1, $2, $3, $4)`,
			topicID, p, cell, replicas)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}
	return rf, nil
}
