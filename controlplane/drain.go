package controlplane

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// adminDrainBroker drains a broker (POST /v1/admin/brokers/{id}/drain):
// its status becomes draining (placement picks only active brokers) and
// every partition that lists it gets a move replacing it, at the same
// position, by the active broker of the cell with the fewest replicas
// that the partition does not already have. A partition whose unfinished
// move already takes the broker off is left to it. Draining again (once
// more brokers joined, say) moves what is left. Refused, with nothing
// changed: a partition with an unfinished move that keeps the broker or
// moves a replica onto it, a partition no other active broker could take,
// or a cell that is not movable (checkCellMovable).
func (s *Server) adminDrainBroker(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	var moves []int64
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var cell string
		var node int
		err := tx.QueryRow(ctx, `SELECT cell_id, node_id FROM brokers WHERE id = $1 FOR UPDATE`, id).Scan(&cell, &node)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such broker")
		}
		if err != nil {
			return err
		}
		if err := lockCellMoves(ctx, tx, cell); err != nil {
			return err
		}
		if moves, err = drainMoves(ctx, tx, p, cell, id, node, s.cfg.OffsetsPartitions); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE brokers SET status = 'draining' WHERE id = $1`, id); err != nil {
			return err
		}
		return bumpCellAndAudit(ctx, tx, cell, p, "broker.drain", id, map[string]any{"moves": moves})
	})
	if err := txError("drain broker", err); err != nil {
		return err
	}
	b, err := s.loadBroker(ctx, id)
	if err != nil {
		return err
	}
	out := api.Drain{Broker: b, Moves: []api.Move{}}
	if len(moves) > 0 {
		if out.Moves, err = s.loadMoves(ctx, `WHERE m.id = ANY($1) ORDER BY m.id`, moves); err != nil {
			return dbError("load moves", err)
		}
	}
	return c.JSON(http.StatusOK, out)
}

// drainMoves creates the moves that take node's replicas off, in topic
// and partition order and then the offsets partitions', and returns their
// ids. A drain of a broker holding an offsets partition takes the cell's
// offsets placement over (offsets.go).
func drainMoves(ctx context.Context, tx pgx.Tx, p *principal, cell, brokerID string, node, offsetsPartitions int) ([]int64, error) {
	type part struct {
		topic    string
		part     int
		replicas []int
		move     *int64
		goal     []int
	}
	rows, err := tx.Query(ctx, `SELECT p.topic_id, p.partition, p.replicas, m.id, m.state, m.target
		FROM partitions p LEFT JOIN partition_moves m ON m.topic_id = p.topic_id AND m.partition = p.partition
			AND m.state IN ('running', 'cancelling', 'failed')
		WHERE p.cell_id = $1 ORDER BY p.topic_id, p.partition FOR UPDATE OF p`, cell)
	if err != nil {
		return nil, err
	}
	var parts []part
	var x part
	var state *string
	var target []int
	if _, err := pgx.ForEachRow(rows, []any{&x.topic, &x.part, &x.replicas, &x.move, &state, &target}, func() error {
		x.goal = x.replicas
		if state != nil {
			x.goal = moveGoal(*state, x.replicas, target)
		}
		parts = append(parts, x)
		return nil
	}); err != nil {
		return nil, err
	}
	// The offsets partitions, when the broker holds one or the control
	// plane has their placement already.
	placement, taken, err := offsetsPlacement(ctx, tx, cell, offsetsPartitions)
	if err != nil {
		return nil, err
	}
	holds := slices.ContainsFunc(placement, func(r []int) bool { return slices.Contains(r, node) })
	if holds || taken {
		type move struct {
			id     int64
			state  string
			target []int
		}
		moves := map[int]move{}
		rows, err := tx.Query(ctx, `SELECT partition, id, state, target FROM partition_moves WHERE cell_id = $1 AND topic_id = $2
			AND state IN ('running', 'cancelling', 'failed')`, cell, offsetsTopicID)
		if err != nil {
			return nil, err
		}
		var p int
		var mv move
		if _, err := pgx.ForEachRow(rows, []any{&p, &mv.id, &mv.state, &mv.target}, func() error { moves[p] = mv; return nil }); err != nil {
			return nil, err
		}
		for i, r := range placement {
			x := part{topic: offsetsTopicID, part: i, replicas: r, goal: r}
			if mv, ok := moves[i]; ok {
				x.move, x.goal = &mv.id, moveGoal(mv.state, r, mv.target)
			}
			parts = append(parts, x)
		}
	}
	rows, err = tx.Query(ctx, `SELECT node_id FROM brokers WHERE cell_id = $1 AND status = 'active' AND id <> $2 ORDER BY node_id`, cell, brokerID)
	if err != nil {
		return nil, err
	}
	active, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	// load is each active broker's replica count once every unfinished
	// move reaches its goal; new moves add to it as they are made.
	load := map[int]int{}
	for _, x := range parts {
		for _, n := range x.goal {
			load[n]++
		}
	}
	var todo []part
	for _, x := range parts {
		switch {
		case x.move != nil && slices.Contains(x.goal, node):
			return nil, catalog.AlreadyExists.Newf("partition %d of topic %s has unfinished move %d that keeps node %d or moves a replica onto it; wait for it or cancel it, then drain again",
				x.part, x.topic, *x.move, node)
		case x.move == nil && slices.Contains(x.replicas, node):
			todo = append(todo, x)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	if err := checkCellMovable(ctx, tx, cell); err != nil {
		return nil, err
	}
	if holds && !taken {
		if err := takeOverOffsets(ctx, tx, p, cell, placement); err != nil {
			return nil, err
		}
	}
	var ids []int64
	for _, x := range todo {
		best := 0
		for _, n := range active {
			if !slices.Contains(x.replicas, n) && (best == 0 || load[n] < load[best]) {
				best = n
			}
		}
		if best == 0 {
			return nil, catalog.InvalidRequest.Newf("no active broker of cell %s other than %s can take partition %d of topic %s (its replicas are %v); add a broker to the cell first",
				cell, brokerID, x.part, x.topic, x.replicas)
		}
		target := slices.Clone(x.replicas)
		target[slices.Index(target, node)] = best
		load[best]++
		id, err := createMove(ctx, tx, p, cell, x.topic, x.part, x.replicas, target, "drain of broker "+brokerID)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
