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
	sets, rf, err := replicaSets(ctx, tx, cell, to-from, "the tenant's cell")
	if err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	for p := from; p < to; p++ {
		batch.Queue(`INSERT INTO partitions (topic_id, partition, cell_id, replicas) VALUES ($1, $2, $3, $4)`,
			topicID, p, cell, sets[p-from])
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}
	return rf, nil
}

// replicaSets is the replica sets of n partitions newly placed on cell
// (what names the cell in errors): they rotate through its active brokers,
// starting after the partitions the cell already holds and those a tenant
// move is bringing to it, so preferred leaders spread evenly. Signup's
// topics and a tenant move's destination are placed alike.
func replicaSets(ctx context.Context, tx pgx.Tx, cell string, n int, what string) ([][]int, int, error) {
	rows, err := tx.Query(ctx, `SELECT node_id FROM brokers WHERE cell_id = $1 AND status = 'active' ORDER BY node_id`, cell)
	if err != nil {
		return nil, 0, err
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, 0, err
	}
	if len(nodes) == 0 {
		return nil, 0, catalog.NoCapacity.Newf("%s has no active brokers yet; try again later", what)
	}
	rf := min(replicationFactor, len(nodes))
	var start int
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM partitions WHERE cell_id = $1) + (SELECT count(*) FROM tenant_move_partitions mp
		JOIN tenant_moves m ON m.id = mp.move_id WHERE m.dest_cell_id = $1 AND m.state NOT IN ('done', 'cancelled'))`, cell).Scan(&start); err != nil {
		return nil, 0, err
	}
	sets := make([][]int, n)
	for p := range sets {
		sets[p] = make([]int, rf)
		for i := range sets[p] {
			sets[p][i] = nodes[(start+p+i)%len(nodes)]
		}
	}
	return sets, rf, nil
}
