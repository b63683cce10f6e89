package controlplane

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
)

// ingestMoves applies one broker's report to the unfinished moves of the
// partitions it leads (LeaderNode is its own node): it records the
// leader's Raft configuration and the joining replicas' distance, and
// finishes a move whose leader reports voters equal to its goal (as a
// set) and no non-voters: a running move completes (partitions.replicas
// becomes the target), a cancelling one is cancelled. Each move row is
// locked (FOR UPDATE, in id order), so of two control planes ingesting
// reports at once one finishes the move and the other then sees it
// finished. The offsets partitions (topic id offsetsTopicID) finish the
// same way, their placement in offsets_placements. A failed move takes
// the leader's reports as a running one does, and completes the same way
// (its cause cleared). Then the cell's running moves that cannot reach
// their target fail (failMoves). It runs in the report's transaction.
func (s *Server) ingestMoves(ctx context.Context, tx pgx.Tx, cell, broker string, node int, parts []wire.PartitionStatus) error {
	if err := s.ingestLeaderReports(ctx, tx, cell, node, parts); err != nil {
		return err
	}
	return s.failMoves(ctx, tx, cell, broker)
}

func (s *Server) ingestLeaderReports(ctx context.Context, tx pgx.Tx, cell string, node int, parts []wire.PartitionStatus) error {
	led := map[string]wire.PartitionStatus{}
	var topics []string
	for _, p := range parts {
		if p.LeaderNode == node && node != 0 {
			led[p.TopicID+"/"+strconv.Itoa(p.Partition)] = p
			topics = append(topics, p.TopicID)
		}
	}
	if len(led) == 0 {
		return nil
	}
	type move struct {
		id               int64
		topic            string
		part             int
		state            string
		original, target []int
		voters           []int
		remaining        *int64
		progressAt       *time.Time
		rate             float64
		status           wire.PartitionStatus
	}
	rows, err := tx.Query(ctx, `SELECT id, topic_id, partition, state, original, target, voters, bytes_remaining, progress_at, bytes_per_sec
		FROM partition_moves WHERE cell_id = $1 AND topic_id = ANY($2) AND state IN ('running', 'cancelling', 'failed')
		ORDER BY id FOR UPDATE`, cell, topics)
	if err != nil {
		return err
	}
	var moves []move
	var m move
	if _, err := pgx.ForEachRow(rows, []any{&m.id, &m.topic, &m.part, &m.state, &m.original, &m.target, &m.voters, &m.remaining, &m.progressAt, &m.rate},
		func() error {
			if st, ok := led[m.topic+"/"+strconv.Itoa(m.part)]; ok {
				m.status = st
				moves = append(moves, m)
			}
			return nil
		}); err != nil {
		return err
	}
	now := s.cfg.Now().Truncate(time.Microsecond) // as Postgres stores it
	bump := false
	system := &principal{kind: "api_key", keyID: "cell-key@" + cell}
	for _, m := range moves {
		st := m.status
		joining := make([]api.MoveJoining, 0, len(st.Joining))
		var remaining int64
		for _, j := range st.Joining {
			joining = append(joining, api.MoveJoining{Node: j.Node, BytesBehind: j.BytesBehind, EntriesBehind: j.EntriesBehind})
			remaining += max(j.BytesBehind, 0)
		}
		rate := m.rate
		if m.remaining != nil && m.progressAt != nil && remaining < *m.remaining {
			if dt := now.Sub(*m.progressAt).Seconds(); dt > 0 {
				rate = float64(*m.remaining-remaining) / dt
			}
		}
		js, err := json.Marshal(joining)
		if err != nil {
			return err
		}
		voters, nonvoters := orEmpty(st.Voters), orEmpty(st.Nonvoters)
		goal := moveGoal(m.state, m.original, m.target)
		if len(st.Voters) > 0 && len(st.Nonvoters) == 0 && sameSet(st.Voters, goal) {
			final := moveCompleted
			if m.state == moveCancelling {
				final = moveCancelled
			} else if m.topic == offsetsTopicID {
				if _, err := tx.Exec(ctx, `UPDATE offsets_placements SET replicas = $3 WHERE cell_id = $1 AND partition = $2`,
					cell, m.part, m.target); err != nil {
					return err
				}
			} else if _, err := tx.Exec(ctx, `UPDATE partitions SET replicas = $3 WHERE topic_id = $1 AND partition = $2`,
				m.topic, m.part, m.target); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE partition_moves SET state = $2, voters = $3, nonvoters = $4, joining = '[]',
				bytes_remaining = 0, progress_at = $5, updated_at = now(), finished_at = now() WHERE id = $1`,
				m.id, final, voters, nonvoters, now); err != nil {
				return err
			}
			if err := audit(ctx, tx, system, "move."+final, strconv.FormatInt(m.id, 10), map[string]any{"voters": voters}); err != nil {
				return err
			}
			bump = true
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE partition_moves SET voters = $2, nonvoters = $3, joining = $4, bytes_remaining = $5,
			progress_at = $6, bytes_per_sec = $7, updated_at = now() WHERE id = $1`,
			m.id, voters, nonvoters, js, remaining, now, rate); err != nil {
			return err
		}
		// A cancelling move publishes as Adding the original brokers the
		// leader dropped from its configuration: when that changes, the
		// brokers must see it.
		if m.state == moveCancelling {
			_, before, _ := publishMove(m.state, m.original, m.target, m.voters)
			_, after, _ := publishMove(m.state, m.original, m.target, st.Voters)
			if !sameSet(before, after) {
				bump = true
			}
		}
	}
	if bump {
		return bumpCell(ctx, tx, cell)
	}
	return nil
}

func orEmpty(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}
