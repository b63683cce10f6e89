package controlplane

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/wire"
)

// The cell's consumer-group offsets partitions. Brokers place them
// themselves (wire.OffsetsPlacement) until the control plane
// takes the placement over, which a drain of one of their brokers does:
// it stores exactly the brokers' placement in offsets_placements, then
// publishes it in wire.CellState.Offsets and moves those partitions like
// topic partitions (moves of topic id offsetsTopicID).

// The offsets topic id, partition count and replica count are the
// brokers' (wire.OffsetsTopicID, wire.DefaultOffsetsPartitions,
// wire.DefaultOffsetsReplicas); tenantd's brokers always run with the
// defaults, and Config.OffsetsPartitions must equal what every broker of
// every cell runs with.
const (
	offsetsTopicID           = wire.OffsetsTopicID
	defaultOffsetsPartitions = wire.DefaultOffsetsPartitions
	offsetsReplicas          = wire.DefaultOffsetsReplicas
)

// defaultOffsetsPlacement is the brokers' own placement
// (wire.OffsetsPlacement) of n partitions over the cell's brokers.
func defaultOffsetsPlacement(nodes []int, n int) [][]int {
	return wire.OffsetsPlacement(nodes, n, offsetsReplicas)
}

// offsetsPlacement is the cell's offsets placement, by partition, and
// whether the control plane has taken it over.
func offsetsPlacement(ctx context.Context, tx pgx.Tx, cell string, n int) ([][]int, bool, error) {
	rows, err := tx.Query(ctx, `SELECT replicas FROM offsets_placements WHERE cell_id = $1 ORDER BY partition`, cell)
	if err != nil {
		return nil, false, err
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[[]int])
	if err != nil || len(taken) > 0 {
		return taken, len(taken) > 0, err
	}
	rows, err = tx.Query(ctx, `SELECT node_id FROM brokers WHERE cell_id = $1`, cell)
	if err != nil {
		return nil, false, err
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[int])
	return defaultOffsetsPlacement(nodes, n), false, err
}

// takeOverOffsets stores placement as the cell's offsets placement.
func takeOverOffsets(ctx context.Context, tx pgx.Tx, p *principal, cell string, placement [][]int) error {
	batch := &pgx.Batch{}
	for part, r := range placement {
		batch.Queue(`INSERT INTO offsets_placements (cell_id, partition, replicas) VALUES ($1, $2, $3)`, cell, part, r)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return audit(ctx, tx, p, "offsets.take_over", cell, map[string]any{"placement": placement})
}
