package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
)

// moveStallLimit is how long a running move's new replica's broker may go
// without reporting, or the partition without a report from its leader,
// before the move fails.
const moveStallLimit = 2 * time.Minute

// moveFailure is why a running move cannot reach its target as things
// stand, "" if nothing keeps it from it: a broker of a new replica that
// is no longer in the cell, offline or draining (an operator took it out
// of service), or silent for moveStallLimit; or no report from the
// partition's leader for moveStallLimit (its replicas lost their
// majority, or its brokers are down). Silence counts from the move's
// start at the earliest (a broker added for the move may not run yet).
// reporter is the broker whose report is being applied: it is not silent.
func moveFailure(now, started time.Time, original, target []int, lastLeaderReport *time.Time, brokers map[int]moveBroker, reporter string) string {
	silent := func(at *time.Time) bool {
		if at == nil || at.Before(started) {
			at = &started
		}
		return now.Sub(*at) > moveStallLimit
	}
	for _, n := range api.NodesMinus(target, original) {
		b, ok := brokers[n]
		switch {
		case !ok:
			return fmt.Sprintf("node %d, a new replica, is no longer a broker of the cell", n)
		case b.status == "offline" || b.status == "draining":
			return fmt.Sprintf("broker %s (node %d), a new replica, is %s", b.id, n, b.status)
		case b.id != reporter && silent(b.lastSeen):
			return fmt.Sprintf("broker %s (node %d), a new replica, has not reported for more than %v", b.id, n, moveStallLimit)
		}
	}
	if silent(lastLeaderReport) {
		return fmt.Sprintf("no leader of the partition has reported for more than %v (its replicas may have lost their majority)", moveStallLimit)
	}
	return ""
}

// moveBroker is what moveFailure needs of a broker.
type moveBroker struct {
	id, status string
	lastSeen   *time.Time
}

// failMoves fails the cell's running moves that moveFailure finds stuck,
// with its reason, in the report's transaction (rows locked in id order,
// as ingestMoves does). Nothing is published: a failed move stays
// published as running.
func (s *Server) failMoves(ctx context.Context, tx pgx.Tx, cell, reporter string) error {
	type move struct {
		id               int64
		original, target []int
		started          time.Time
		lastReport       *time.Time
	}
	rows, err := tx.Query(ctx, `SELECT id, original, target, created_at, progress_at FROM partition_moves
		WHERE cell_id = $1 AND state = 'running' ORDER BY id FOR UPDATE`, cell)
	if err != nil {
		return err
	}
	var moves []move
	var m move
	if _, err := pgx.ForEachRow(rows, []any{&m.id, &m.original, &m.target, &m.started, &m.lastReport}, func() error {
		moves = append(moves, m)
		return nil
	}); err != nil {
		return err
	}
	if len(moves) == 0 {
		return nil
	}
	rows, err = tx.Query(ctx, `SELECT node_id, id, status, last_seen_at FROM brokers WHERE cell_id = $1`, cell)
	if err != nil {
		return err
	}
	brokers := map[int]moveBroker{}
	var node int
	var b moveBroker
	if _, err := pgx.ForEachRow(rows, []any{&node, &b.id, &b.status, &b.lastSeen}, func() error {
		brokers[node] = b
		return nil
	}); err != nil {
		return err
	}
	now := s.cfg.Now()
	system := &principal{kind: "api_key", keyID: "cell-key@" + cell}
	for _, m := range moves {
		why := moveFailure(now, m.started, m.original, m.target, m.lastReport, brokers, reporter)
		if why == "" {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE partition_moves SET state = 'failed', failure = $2, updated_at = now() WHERE id = $1`,
			m.id, why); err != nil {
			return err
		}
		s.log.Warn("replica move failed", "cell", cell, "move", m.id, "reason", why)
		if err := audit(ctx, tx, system, "move.failed", strconv.FormatInt(m.id, 10), map[string]any{"failure": why,
			"target": slices.Clone(m.target)}); err != nil {
			return err
		}
	}
	return nil
}
