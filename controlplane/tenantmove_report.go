package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/wire"
)

// tenantMoveMaxLag is how far behind its source (in offsets) every
// destination leader may report its mirror for the move to fence the
// source: the fence then stops producers for about the time the mirror
// needs to pull that much.
const tenantMoveMaxLag = 1000

// reportedMove is an unfinished tenant move of a reporting broker's cell,
// locked for the report's transaction.
type reportedMove struct {
	id                         int64
	tenant, source, dest, pool string
	state                      string
	switchVersion              *int64
	acked                      []string
	imported                   []int
}

// lockTenantMoves locks, in id order, the unfinished tenant moves from or
// to cell. A report takes these locks before it touches any cell row, so
// two control planes (or a report and a cancel) advancing one move take
// turns and never deadlock over the cells' versions.
func lockTenantMoves(ctx context.Context, tx pgx.Tx, cell string) ([]reportedMove, error) {
	rows, err := tx.Query(ctx, `SELECT m.id, m.tenant_id, m.source_cell_id, m.dest_cell_id, m.dest_pool_id, m.state,
		m.switch_version, m.switch_acked, m.offsets_imported FROM tenant_moves m
		WHERE (m.source_cell_id = $1 OR m.dest_cell_id = $1) AND `+tmUnfinished+` ORDER BY m.id FOR UPDATE`, cell)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (reportedMove, error) {
		var m reportedMove
		return m, r.Scan(&m.id, &m.tenant, &m.source, &m.dest, &m.pool, &m.state, &m.switchVersion, &m.acked, &m.imported)
	})
}

// ingestTenantMoves applies one broker's report to the locked moves: a
// destination leader's mirror status and a source leader's fence, a
// source broker's state version after the switch, a destination broker's
// offsets acknowledgement; then each move advances as far as what is
// stored allows (advanceTenantMove). It runs last in the report's
// transaction, after the report's group lag is stored.
func (s *Server) ingestTenantMoves(ctx context.Context, tx pgx.Tx, cell, broker string, node int, r wire.Report, moves []reportedMove) error {
	for _, m := range moves {
		batch := &pgx.Batch{}
		for _, p := range r.Partitions {
			if p.Mirror == nil || node == 0 || p.LeaderNode != node {
				continue
			}
			ms := p.Mirror
			switch cell {
			case m.dest:
				// A mirror that has not read its source yet reports no
				// lag (NULL: not caught up); a promoted one lags by nothing.
				batch.Queue(`UPDATE tenant_move_partitions SET mirroring = $4, lag = CASE WHEN $6 THEN 0 ELSE $5::bigint END, promoted = $6, mirror_error = $7, mirror_at = now(),
					dest_broker_id = $8, dest_leader_epoch = $9, dest_log_start = $10, dest_log_end = $11, dest_hw = $12, dest_size = $13,
					mirror_bytes_per_sec = CASE WHEN $4 THEN $14::bigint END
					WHERE move_id = $1 AND topic_id = $2 AND partition = $3`, m.id, p.TopicID, p.Partition, ms.Mirroring, ms.Lag, ms.Promoted, ms.Error,
					broker, p.LeaderEpoch, p.LogStartOffset, p.LogEndOffset, p.HighWatermark, p.SizeBytes, ms.BytesPerSec)
			case m.source:
				batch.Queue(`UPDATE tenant_move_partitions SET fenced = $4, fenced_end = $5, fenced_at = now()
					WHERE move_id = $1 AND topic_id = $2 AND partition = $3`, m.id, p.TopicID, p.Partition, ms.Fenced, ms.FencedEnd)
			}
		}
		if cell == m.dest && m.state == tmOffsets {
			for _, oi := range r.OffsetsImported {
				if oi.TenantID != m.tenant {
					continue
				}
				for _, part := range oi.Partitions {
					if part >= 0 && part < s.cfg.OffsetsPartitions && !slices.Contains(m.imported, part) {
						m.imported = append(m.imported, part)
					}
				}
			}
			slices.Sort(m.imported)
			batch.Queue(`UPDATE tenant_moves SET offsets_imported = $2 WHERE id = $1`, m.id, m.imported)
		}
		if cell == m.source && m.state == tmSwitching && m.switchVersion != nil && r.StateVersion >= *m.switchVersion &&
			!slices.Contains(m.acked, broker) {
			m.acked = append(m.acked, broker)
			batch.Queue(`UPDATE tenant_moves SET switch_acked = $2 WHERE id = $1`, m.id, m.acked)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if err := s.advanceTenantMove(ctx, tx, cell, m); err != nil {
			return err
		}
	}
	return nil
}

// advanceTenantMove moves m on while its next step's condition holds:
//
//	mirroring → fencing: every destination leader reported mirroring with
//	  a lag of at most tenantMoveMaxLag;
//	fencing → promoting: every source leader reported its partition fenced;
//	promoting → switching: every destination leader reported it promoted;
//	  the switch itself happens here (switchTenant);
//	switching → offsets: every source broker not offline reported a state
//	  version at or past the switch's; the tenant's final committed
//	  offsets are taken from those brokers' group lag rows;
//	offsets → done: the destination's offsets partitions all acknowledged
//	  the import.
//
// Otherwise it records what holds the move back in its error.
func (s *Server) advanceTenantMove(ctx context.Context, tx pgx.Tx, cell string, m reportedMove) error {
	system := &principal{kind: "api_key", keyID: "cell-key@" + cell, tenantID: m.tenant}
	for {
		next, why, err := s.tenantMoveStep(ctx, tx, m)
		if err != nil {
			return err
		}
		if next == "" {
			_, err := tx.Exec(ctx, `UPDATE tenant_moves SET error = $2, updated_at = now() WHERE id = $1 AND error <> $2`, m.id, why)
			return err
		}
		if err := audit(ctx, tx, system, "tenant.move."+next, strconv.FormatInt(m.id, 10), map[string]any{"from": m.state}); err != nil {
			return err
		}
		m.state = next
		if next == tmDone {
			return nil
		}
	}
}

// tenantMoveStep takes m's next step if its condition holds and returns
// the new state; else "" and why not.
func (s *Server) tenantMoveStep(ctx context.Context, tx pgx.Tx, m reportedMove) (next, why string, err error) {
	var blocked, total int
	var first, firstErr string
	count := func(filter string) error {
		return tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+filter+`), count(*),
			coalesce(min(topic_id || '/' || partition) FILTER (WHERE `+filter+`), ''),
			coalesce(min(mirror_error) FILTER (WHERE mirror_error <> ''), '')
			FROM tenant_move_partitions WHERE move_id = $1`, m.id).Scan(&blocked, &total, &first, &firstErr)
	}
	set := func(state string, cells ...string) (string, string, error) {
		if _, err := tx.Exec(ctx, `UPDATE tenant_moves SET state = $2, error = '', updated_at = now(),
			finished_at = CASE WHEN $2 = 'done' THEN now() END WHERE id = $1`, m.id, state); err != nil {
			return "", "", err
		}
		for _, c := range cells {
			if err := bumpCell(ctx, tx, c); err != nil {
				return "", "", err
			}
		}
		return state, "", nil
	}
	switch m.state {
	case tmMirroring:
		if err := count(`NOT mirroring OR lag IS NULL OR lag > ` + strconv.Itoa(tenantMoveMaxLag)); err != nil {
			return "", "", err
		}
		if blocked > 0 {
			return "", stuck(fmt.Sprintf("%d of %d destination partitions are not yet mirroring within %d offsets of the source (first %s)",
				blocked, total, tenantMoveMaxLag, first), firstErr), nil
		}
		return set(tmFencing, m.source)
	case tmFencing:
		if err := count(`NOT fenced`); err != nil {
			return "", "", err
		}
		if blocked > 0 {
			return "", fmt.Sprintf("%d of %d source partitions are not yet reported fenced (first %s)", blocked, total, first), nil
		}
		return set(tmPromoting, m.dest)
	case tmPromoting:
		if err := count(`NOT promoted`); err != nil {
			return "", "", err
		}
		if blocked > 0 {
			return "", stuck(fmt.Sprintf("%d of %d destination partitions are not yet reported promoted (first %s)", blocked, total, first), firstErr), nil
		}
		if err := switchTenant(ctx, tx, m); err != nil {
			return "", "", err
		}
		return tmSwitching, "", nil
	case tmSwitching:
		var waiting []string
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM brokers
			WHERE cell_id = $1 AND status <> 'offline' AND NOT (id = ANY($2))`, m.source, m.acked).Scan(&waiting); err != nil {
			return "", "", err
		}
		if len(waiting) > 0 {
			v := int64(0)
			if m.switchVersion != nil {
				v = *m.switchVersion
			}
			return "", fmt.Sprintf("waiting for source brokers %s to report state version %d or later (the switch)", strings.Join(waiting, ", "), v), nil
		}
		if err := takeFinalOffsets(ctx, tx, m); err != nil {
			return "", "", err
		}
		return set(tmOffsets, m.dest)
	case tmOffsets:
		var missing []int
		for p := range s.cfg.OffsetsPartitions {
			if !slices.Contains(m.imported, p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Sprintf("waiting for the destination's offsets partitions %v to acknowledge the imported offsets", missing), nil
		}
		return set(tmDone, m.dest)
	}
	return "", "", nil
}

// stuck is why, with a partition's mirror error after it if there is one.
func stuck(why, mirrorErr string) string {
	if mirrorErr != "" {
		return why + "; a mirror reports: " + mirrorErr
	}
	return why
}

// switchTenant hands the tenant over: its home and pool become the
// destination's, its partitions' rows the destination placement (so
// keyhome, /v1/cluster and group lag answer the new home), the source
// brokers' partition status goes (their leaders and epochs no longer
// describe where the tenant is served) and the destination leaders' last
// reports take its place, and both cells get new states:
// the source's drops the tenant and the version of that state is the
// switch's.
func switchTenant(ctx context.Context, tx pgx.Tx, m reportedMove) error {
	if _, err := tx.Exec(ctx, `UPDATE tenants SET home_cell_id = $2, pool_id = $3 WHERE id = $1`, m.tenant, m.dest, m.pool); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE partitions p SET cell_id = $2, replicas = mp.replicas FROM tenant_move_partitions mp
		WHERE mp.move_id = $1 AND p.topic_id = mp.topic_id AND p.partition = mp.partition`, m.id, m.dest); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM partition_status s USING tenant_move_partitions mp
		WHERE mp.move_id = $1 AND s.topic_id = mp.topic_id AND s.partition = mp.partition`, m.id); err != nil {
		return err
	}
	// The destination leaders' last reports (each said it promoted) become
	// the partitions' status, so the tenant's redirected Metadata names
	// its leaders now rather than after the destination's next reports
	// (without an epoch, franz-go waits its metadata age again).
	if _, err := tx.Exec(ctx, `INSERT INTO partition_status (topic_id, partition, broker_id, leader_node, leader_epoch,
			log_start_offset, log_end_offset, high_watermark, size_bytes, reported_at)
		SELECT mp.topic_id, mp.partition, mp.dest_broker_id, b.node_id, mp.dest_leader_epoch,
			mp.dest_log_start, mp.dest_log_end, mp.dest_hw, mp.dest_size, mp.mirror_at
		FROM tenant_move_partitions mp JOIN brokers b ON b.id = mp.dest_broker_id AND b.cell_id = $2
		WHERE mp.move_id = $1 AND mp.dest_leader_epoch IS NOT NULL
		ON CONFLICT (topic_id, partition, broker_id) DO NOTHING`, m.id, m.dest); err != nil {
		return err
	}
	if err := bumpCell(ctx, tx, m.dest); err != nil {
		return err
	}
	var v int64
	if err := tx.QueryRow(ctx, `UPDATE cells SET state_version = state_version + 1 WHERE id = $1 RETURNING state_version`, m.source).Scan(&v); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, stateChannel, m.source); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE tenant_moves SET state = 'switching', switch_version = $2, switch_acked = '{}', error = '',
		updated_at = now() WHERE id = $1`, m.id, v)
	return err
}

// takeFinalOffsets stores the tenant's committed offsets as the source
// brokers reported them at or past the switch (storeGroupLag keeps the
// source's rows of a switched tenant until the move is done): the
// destination's state lists them next.
func takeFinalOffsets(ctx context.Context, tx pgx.Tx, m reportedMove) error {
	rows, err := tx.Query(ctx, `SELECT group_name, topic_id, partition, committed_offset FROM group_lag
		WHERE cell_id = $1 AND tenant_id = $2 AND broker_id = ANY($3) AND committed_offset >= 0
		ORDER BY group_name, topic_id, partition`, m.source, m.tenant, m.acked)
	if err != nil {
		return err
	}
	offsets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.CommittedOffset, error) {
		var o wire.CommittedOffset
		return o, r.Scan(&o.Group, &o.TopicID, &o.Partition, &o.Offset)
	})
	if err != nil {
		return err
	}
	if offsets == nil {
		offsets = []wire.CommittedOffset{}
	}
	js, err := json.Marshal(offsets)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tenant_moves SET group_offsets = $2 WHERE id = $1`, m.id, js)
	return err
}
