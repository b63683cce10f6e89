package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// Replica moves (/v1/admin/moves): one row of partition_moves per move of
// a partition's replica set, at most one unfinished per partition. The
// control plane never drives Raft itself: it publishes the move in the
// cell state (publishMove) and finishes it when the partition leader's
// report shows the goal reached (moves_report.go). Creating moves, here
// and in a drain, holds the cell's move lock (lockCellMoves) so that the
// checks and the replica counts they use see every other creation of the
// cell; finishing one locks only its row.

// Move states. A running move converges to its target; a cancelling one
// back to its original. A failed move is a running one the control plane
// saw could not reach its target as things stand (moves_failure.go): it
// is still published as running, so it completes if its cause clears,
// and an operator cancels it to roll it back.
const (
	moveRunning    = "running"
	moveCompleted  = "completed"
	moveCancelling = "cancelling"
	moveCancelled  = "cancelled"
	moveFailed     = "failed"
)

// liveBrokerWindow is how recently a broker must have reported to count
// as live; a move needs minLiveBrokers live brokers in its cell.
const (
	liveBrokerWindow = "30 seconds"
	minLiveBrokers   = 3
)

// sameSet is whether a and b hold the same node ids, in any order.
func sameSet(a, b []int) bool {
	return len(api.NodesMinus(a, b)) == 0 && len(api.NodesMinus(b, a)) == 0 && len(a) == len(b)
}

// publishMove is what the cell state lists for a partition while its move
// is unfinished: Replicas the goal (target, or original once cancelling)
// first and then the replicas leaving, Adding the goal's brokers not yet
// in the Raft configuration, Removing the brokers leaving. For a running
// (or failed) move Adding is target − original; for a cancelling one it is the
// original brokers the leader's last report no longer lists as voters
// (none before the leader reported).
func publishMove(state string, original, target, voters []int) (replicas, adding, removing []int) {
	switch state {
	case moveRunning, moveFailed:
		removing = api.NodesMinus(original, target)
		return append(slices.Clone(target), removing...), api.NodesMinus(target, original), removing
	case moveCancelling:
		removing = api.NodesMinus(target, original)
		if len(voters) > 0 {
			adding = api.NodesMinus(original, voters)
		}
		return append(slices.Clone(original), removing...), adding, removing
	}
	return nil, nil, nil
}

// moveGoal is the replica set an unfinished move converges to.
func moveGoal(state string, original, target []int) []int {
	if state == moveCancelling {
		return original
	}
	return target
}

// moveSelect reads moves; an offsets partition's has no topic row, so no
// tenant, and its topic id for a name.
const moveSelect = `SELECT m.id, m.cell_id, coalesce(x.tenant_id, ''), m.topic_id, coalesce(x.name, m.topic_id), m.partition,
	m.original, m.target, m.state, m.reason, m.failure, coalesce(m.voters, '{}'), coalesce(m.nonvoters, '{}'), m.joining,
	coalesce(m.bytes_remaining, 0), m.bytes_per_sec, m.progress_at, m.created_by, m.created_at, m.updated_at, m.finished_at
	FROM partition_moves m LEFT JOIN topics x ON x.id = m.topic_id`

func scanMove(row pgx.Row) (api.Move, error) {
	var m api.Move
	var joining []byte
	if err := row.Scan(&m.ID, &m.CellID, &m.TenantID, &m.TopicID, &m.Topic, &m.Partition, &m.Original, &m.Target, &m.State,
		&m.Reason, &m.Failure, &m.Voters, &m.Nonvoters, &joining, &m.BytesRemaining, &m.BytesPerSec, &m.ProgressAt,
		&m.CreatedBy, &m.CreatedAt, &m.UpdatedAt, &m.FinishedAt); err != nil {
		return m, err
	}
	if err := json.Unmarshal(joining, &m.Joining); err != nil {
		return m, err
	}
	if m.Joining == nil {
		m.Joining = []api.MoveJoining{}
	}
	m.Replicas, m.Adding, m.Removing = publishMove(m.State, m.Original, m.Target, m.Voters)
	switch {
	case m.FinishedAt != nil || m.ProgressAt == nil:
	case m.BytesRemaining == 0:
		eta := 0.0
		m.ETASeconds = &eta
	case m.BytesPerSec > 0:
		eta := float64(m.BytesRemaining) / m.BytesPerSec
		m.ETASeconds = &eta
	}
	return m, nil
}

func (s *Server) loadMoves(ctx context.Context, where string, args ...any) ([]api.Move, error) {
	rows, err := s.db.Query(ctx, moveSelect+" "+where, args...)
	if err != nil {
		return nil, err
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Move, error) { return scanMove(r) })
	if ms == nil {
		ms = []api.Move{}
	}
	return ms, err
}

func (s *Server) loadMove(ctx context.Context, id int64) (api.Move, error) {
	ms, err := s.loadMoves(ctx, `WHERE m.id = $1`, id)
	return only("move", ms, err)
}

func moveID(c echo.Context) (int64, error) { return idParam(c, "move") }

func (s *Server) adminGetMove(c echo.Context) error {
	return operatorGet(s, c, byNumericID("move", s.loadMove))
}

// adminListMoves lists moves by id, optionally only those in a state, of
// a cell, or moving a replica onto or off a broker.
func (s *Server) adminListMoves(c echo.Context) error {
	pg, f, err := s.operatorIDPage(c)
	if err != nil {
		return err
	}
	if st := c.QueryParam("state"); st != "" {
		if !slices.Contains([]string{moveRunning, moveCompleted, moveCancelling, moveCancelled, moveFailed}, st) {
			return catalog.InvalidRequest.Newf("state %q: want running, completed, cancelling, cancelled or failed", st)
		}
		f.and("m.state", st)
	}
	if cell := c.QueryParam("cell"); cell != "" {
		f.and("m.cell_id", cell)
	}
	if b := c.QueryParam("broker"); b != "" {
		var cell string
		var node int
		err := s.db.QueryRow(c.Request().Context(), `SELECT cell_id, node_id FROM brokers WHERE id = $1`, b).Scan(&cell, &node)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.Newf("no such broker %q", b)
		}
		if err != nil {
			return dbError("look up broker", err)
		}
		f.and("m.cell_id", cell)
		f.args = append(f.args, node)
		n := strconv.Itoa(len(f.args))
		f.where += ` AND ($` + n + ` = ANY(m.original) OR $` + n + ` = ANY(m.target))`
	}
	return listByID(c, "list moves", pg, f, s.loadMoves, func(m api.Move) int64 { return m.ID })
}

// adminCreateMove starts one partition's move (POST /v1/admin/moves).
func (s *Server) adminCreateMove(c echo.Context) error {
	p, req, err := operatorWrite[api.CreateMoveRequest](s, c)
	if err != nil {
		return err
	}
	if req.TopicID == "" {
		return catalog.InvalidRequest.New("topic_id is required")
	}
	if req.Partition < 0 {
		return catalog.InvalidRequest.Newf("partition %d: partitions are numbered from 0", req.Partition)
	}
	ctx := c.Request().Context()
	var id int64
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var cell string
		var original []int
		var err error
		if req.TopicID == offsetsTopicID {
			cell, original, err = s.offsetsMoveOriginal(ctx, tx, p, req)
		} else {
			cell, original, err = topicMoveOriginal(ctx, tx, req)
		}
		if err != nil {
			return err
		}
		if err := checkCellMovable(ctx, tx, cell); err != nil {
			return err
		}
		id, err = createMove(ctx, tx, p, cell, req.TopicID, req.Partition, original, req.Replicas, "")
		return err
	})
	if err := txError("create move", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusCreated, s.loadMove, id)
}

// topicMoveOriginal finds a topic partition's cell and, under the cell's
// move lock, its replicas.
func topicMoveOriginal(ctx context.Context, tx pgx.Tx, req api.CreateMoveRequest) (string, []int, error) {
	var cell string
	err := tx.QueryRow(ctx, `SELECT cell_id FROM partitions WHERE topic_id = $1 AND partition = $2`, req.TopicID, req.Partition).Scan(&cell)
	if errors.Is(err, pgx.ErrNoRows) {
		var n int
		if err := tx.QueryRow(ctx, `SELECT partitions FROM topics WHERE id = $1`, req.TopicID).Scan(&n); errors.Is(err, pgx.ErrNoRows) {
			return "", nil, catalog.TopicNotFound.Newf("no topic has id %q", req.TopicID)
		} else if err != nil {
			return "", nil, err
		}
		return "", nil, catalog.NotFound.Newf("topic %s has partitions 0 to %d; it has no partition %d", req.TopicID, n-1, req.Partition)
	}
	if err != nil {
		return "", nil, err
	}
	if req.CellID != "" && req.CellID != cell {
		return "", nil, catalog.InvalidRequest.Newf("topic %s is on cell %s, not %s", req.TopicID, cell, req.CellID)
	}
	// The cell's move lock first (a drain takes it before the
	// partitions), then the partition's row, read again: a move that
	// completed meanwhile changed its replicas.
	if err := lockCellMoves(ctx, tx, cell); err != nil {
		return "", nil, err
	}
	var original []int
	err = tx.QueryRow(ctx, `SELECT replicas FROM partitions WHERE topic_id = $1 AND partition = $2 FOR UPDATE`,
		req.TopicID, req.Partition).Scan(&original)
	return cell, original, err
}

// offsetsMoveOriginal is an offsets partition's replicas, under the cell's
// move lock; it takes the cell's offsets placement over if the control
// plane does not hold it yet (undone with the transaction if the move is
// refused).
func (s *Server) offsetsMoveOriginal(ctx context.Context, tx pgx.Tx, p *principal, req api.CreateMoveRequest) (string, []int, error) {
	if req.CellID == "" {
		return "", nil, catalog.InvalidRequest.New("cell_id is required to move an offsets partition")
	}
	if err := mustExist(ctx, tx, "cells", req.CellID, "cell"); err != nil {
		return "", nil, err
	}
	if err := lockCellMoves(ctx, tx, req.CellID); err != nil {
		return "", nil, err
	}
	placement, taken, err := offsetsPlacement(ctx, tx, req.CellID, s.cfg.OffsetsPartitions)
	switch {
	case err != nil:
		return "", nil, err
	case len(placement) == 0:
		return "", nil, catalog.NotFound.Newf("cell %s has fewer than %d brokers, so no offsets partitions yet", req.CellID, offsetsReplicas)
	case req.Partition >= len(placement):
		return "", nil, catalog.NotFound.Newf("cell %s has offsets partitions 0 to %d; it has no partition %d", req.CellID, len(placement)-1, req.Partition)
	case !taken:
		if err := takeOverOffsets(ctx, tx, p, req.CellID, placement); err != nil {
			return "", nil, err
		}
	}
	return req.CellID, placement[req.Partition], nil
}

// lockCellMoves serializes the creation of moves in a cell (its move
// checks and replica counts) across control planes, until tx ends.
func lockCellMoves(ctx context.Context, tx pgx.Tx, cell string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice.partition_moves'), hashtext($1))`, cell)
	return err
}

// checkCellMovable refuses moves in a cell with fewer than minLiveBrokers
// brokers that reported within liveBrokerWindow, or with a live broker
// whose reports do not carry its replicas' Raft configuration (a broker
// that would ignore the move).
func checkCellMovable(ctx context.Context, tx pgx.Tx, cell string) error {
	var live int
	var old []string
	err := tx.QueryRow(ctx, `SELECT count(*), coalesce(array_agg(id ORDER BY id) FILTER (WHERE NOT reports_voters), '{}')
		FROM brokers WHERE cell_id = $1 AND status <> 'offline' AND last_seen_at > now() - interval '`+liveBrokerWindow+`'`,
		cell).Scan(&live, &old)
	if err != nil {
		return err
	}
	if live < minLiveBrokers {
		return catalog.NotEnoughReplicas.Newf("cell %s has %d live brokers (reported within the last %s); a move needs at least %d",
			cell, live, liveBrokerWindow, minLiveBrokers)
	}
	if len(old) > 0 {
		return catalog.Unavailable.Newf("broker %s of cell %s does not report its replicas' Raft configuration (a broker without replica moves); upgrade it before moving replicas",
			old[0], cell)
	}
	return nil
}

// joinersExcused sets a broker's reports_voters after all when every
// replica its report lists without a Raft configuration is one an
// unfinished move is adding to it: a joining replica has none until its
// leader adds it, and that must not make the cell refuse further moves.
func joinersExcused(ctx context.Context, tx pgx.Tx, cell, broker string, node int, parts []wire.PartitionStatus) error {
	rows, err := tx.Query(ctx, `SELECT topic_id, partition FROM partition_moves WHERE cell_id = $1
		AND state IN ('running', 'cancelling', 'failed') AND $2 = ANY(target || original)`, cell, node)
	if err != nil {
		return err
	}
	joining := map[string]bool{}
	var topic string
	var part int
	if _, err := pgx.ForEachRow(rows, []any{&topic, &part}, func() error {
		joining[topic+"/"+strconv.Itoa(part)] = true
		return nil
	}); err != nil {
		return err
	}
	for _, p := range parts {
		if len(p.Voters) == 0 && !joining[p.TopicID+"/"+strconv.Itoa(p.Partition)] {
			return nil
		}
	}
	_, err = tx.Exec(ctx, `UPDATE brokers SET reports_voters = true WHERE id = $1`, broker)
	return err
}

// createMove checks and stores a move of one partition from original to
// target, and bumps the cell so its brokers see it. The caller holds the
// cell's move lock and has checked the cell is movable.
func createMove(ctx context.Context, tx pgx.Tx, p *principal, cell, topicID string, part int, original, target []int, reason string) (int64, error) {
	if len(target) != len(original) {
		return 0, catalog.ReplicationFactor.Newf("partition %d of topic %s has %d replicas; name exactly %d broker node ids, not %d",
			part, topicID, len(original), len(original), len(target))
	}
	for i, n := range target {
		if slices.Contains(target[:i], n) {
			return 0, catalog.InvalidRequest.Newf("replicas names node %d twice; name %d different brokers", n, len(original))
		}
	}
	if slices.Equal(original, target) {
		return 0, catalog.InvalidRequest.Newf("partition %d of topic %s already has replicas %v", part, topicID, target)
	}
	if err := refuseTenantMoving(ctx, tx, topicID); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `SELECT node_id, id, status FROM brokers WHERE cell_id = $1 AND node_id = ANY($2)`, cell, target)
	if err != nil {
		return 0, err
	}
	type broker struct{ id, status string }
	brokers := map[int]broker{}
	var b broker
	var node int
	if _, err := pgx.ForEachRow(rows, []any{&node, &b.id, &b.status}, func() error { brokers[node] = b; return nil }); err != nil {
		return 0, err
	}
	for _, n := range target {
		b, ok := brokers[n]
		switch {
		case !ok:
			return 0, catalog.InvalidRequest.Newf("node %d is not a broker of cell %s, the partition's cell", n, cell)
		case b.status != "active" && !slices.Contains(original, n):
			return 0, catalog.InvalidRequest.Newf("broker %s (node %d) is %s; new replicas go only to active brokers", b.id, n, b.status)
		}
	}
	var other int64
	var state string
	err = tx.QueryRow(ctx, `SELECT id, state FROM partition_moves WHERE cell_id = $3 AND topic_id = $1 AND partition = $2
		AND state IN ('running', 'cancelling', 'failed')`, topicID, part, cell).Scan(&other, &state)
	switch {
	case err == nil:
		return 0, catalog.AlreadyExists.Newf("partition %d of topic %s already has move %d (%s); wait for it to finish or cancel it", part, topicID, other, state)
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, err
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO partition_moves (cell_id, topic_id, partition, original, target, reason, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, cell, topicID, part, original, target, reason, p.actor()).Scan(&id); err != nil {
		return 0, err
	}
	if err := bumpCell(ctx, tx, cell); err != nil {
		return 0, err
	}
	return id, audit(ctx, tx, p, "move.create", strconv.FormatInt(id, 10), map[string]any{"topic_id": topicID, "partition": part,
		"original": original, "target": target, "reason": reason})
}

// adminCancelMove rolls a running or failed move back (POST
// /v1/admin/moves/{id}/cancel): its goal becomes the original replicas.
// Cancelling a cancelling move changes nothing; a finished one is refused.
func (s *Server) adminCancelMove(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	id, err := moveID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var cell, state string
		err := tx.QueryRow(ctx, `SELECT cell_id, state FROM partition_moves WHERE id = $1 FOR UPDATE`, id).Scan(&cell, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such move")
		}
		if err != nil {
			return err
		}
		switch state {
		case moveCancelling:
			return nil
		case moveRunning, moveFailed:
		default:
			return catalog.InvalidRequest.Newf("move %d is %s; only a running move can be cancelled, or a failed one", id, state)
		}
		if _, err := tx.Exec(ctx, `UPDATE partition_moves SET state = 'cancelling', updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		return bumpCellAndAudit(ctx, tx, cell, p, "move.cancel", strconv.FormatInt(id, 10), nil)
	})
	if err := txError("cancel move", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadMove, id)
}
