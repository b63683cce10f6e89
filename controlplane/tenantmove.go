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

// Tenant moves (/v1/admin/tenants/{id}/move, /v1/admin/tenant-moves): a
// tenant's move from its home cell to a cell of another pool, one row of
// tenant_moves with the destination placement in tenant_move_partitions.
// As for replica moves, the control plane never carries data: it derives
// both cells' states from the row (tenantmove_state.go) and advances the
// row from the two cells' reports (tenantmove_report.go).

// Tenant move states, in order; cancelled ends a move before promoting.
const (
	tmMirroring = "mirroring"
	tmFencing   = "fencing"
	tmPromoting = "promoting"
	tmSwitching = "switching"
	tmOffsets   = "offsets"
	tmDone      = "done"
	tmCancelled = "cancelled"
)

var tenantMoveStates = []string{tmMirroring, tmFencing, tmPromoting, tmSwitching, tmOffsets, tmDone, tmCancelled}

// tmUnfinished is the SQL test of an unfinished tenant move (alias m).
const tmUnfinished = `m.state NOT IN ('done', 'cancelled')`

// beforeSwitch is whether the source still serves the tenant in state.
func beforeSwitch(state string) bool {
	return state == tmMirroring || state == tmFencing || state == tmPromoting
}

const tenantMoveSelect = `SELECT m.id, m.tenant_id, m.source_cell_id, m.dest_cell_id, m.dest_pool_id, m.state, m.error,
	m.switch_version, jsonb_array_length(m.group_offsets), m.offsets_imported, m.created_by, m.created_at, m.updated_at,
	m.finished_at, m.bytes_per_sec, (SELECT count(*) FROM tenant_move_partitions mp WHERE mp.move_id = m.id)
	FROM tenant_moves m`

func (s *Server) loadTenantMoves(ctx context.Context, where string, args ...any) ([]api.TenantMove, error) {
	rows, err := s.db.Query(ctx, tenantMoveSelect+" "+where, args...)
	if err != nil {
		return nil, err
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.TenantMove, error) {
		var m api.TenantMove
		var parts int
		err := r.Scan(&m.ID, &m.TenantID, &m.SourceCellID, &m.DestCellID, &m.PoolID, &m.State, &m.Error, &m.SwitchVersion,
			&m.GroupOffsets, &m.OffsetsImported, &m.CreatedBy, &m.CreatedAt, &m.UpdatedAt, &m.FinishedAt, &m.BytesPerSec, &parts)
		m.PartitionBytesPerSec = partitionRate(m.BytesPerSec, parts)
		m.Partitions = []api.TenantMovePartition{}
		return m, err
	})
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return []api.TenantMove{}, nil
	}
	idx := map[int64]int{}
	ids := make([]int64, len(ms))
	for i, m := range ms {
		idx[m.ID], ids[i] = i, m.ID
	}
	rows, err = s.db.Query(ctx, `SELECT mp.move_id, mp.topic_id, coalesce(x.name, ''), mp.partition, mp.replicas, mp.mirroring, mp.lag,
		mp.promoted, mp.mirror_error, mp.mirror_at, mp.fenced, mp.fenced_end, mp.fenced_at, mp.mirror_bytes_per_sec
		FROM tenant_move_partitions mp LEFT JOIN topics x ON x.id = mp.topic_id
		WHERE mp.move_id = ANY($1) ORDER BY mp.move_id, x.name, mp.partition`, ids)
	if err != nil {
		return nil, err
	}
	var id int64
	var p api.TenantMovePartition
	_, err = pgx.ForEachRow(rows, []any{&id, &p.TopicID, &p.Topic, &p.Partition, &p.Replicas, &p.Mirroring, &p.Lag, &p.Promoted,
		&p.MirrorError, &p.MirrorAt, &p.Fenced, &p.FencedEnd, &p.FencedAt, &p.MirrorBytesPerSec}, func() error {
		m := &ms[idx[id]]
		m.Partitions = append(m.Partitions, p)
		return nil
	})
	return ms, err
}

func (s *Server) loadTenantMove(ctx context.Context, id int64) (api.TenantMove, error) {
	ms, err := s.loadTenantMoves(ctx, `WHERE m.id = $1`, id)
	return only("tenant move", ms, err)
}

func tenantMoveID(c echo.Context) (int64, error) { return idParam(c, "tenant move") }

func (s *Server) adminGetTenantMove(c echo.Context) error {
	return operatorGet(s, c, byNumericID("tenant move", s.loadTenantMove))
}

// adminListTenantMoves lists tenant moves by id, optionally only those in
// a state or of a tenant.
func (s *Server) adminListTenantMoves(c echo.Context) error {
	pg, f, err := s.operatorIDPage(c)
	if err != nil {
		return err
	}
	if st := c.QueryParam("state"); st != "" {
		if !slices.Contains(tenantMoveStates, st) {
			return catalog.InvalidRequest.Newf("state %q: want one of mirroring, fencing, promoting, switching, offsets, done, cancelled", st)
		}
		f.and("m.state", st)
	}
	if tn := c.QueryParam("tenant"); tn != "" {
		f.and("m.tenant_id", tn)
	}
	return listByID(c, "list tenant moves", pg, f, s.loadTenantMoves, func(m api.TenantMove) int64 { return m.ID })
}

// adminMoveTenant starts a tenant's move to a cell of another pool (POST
// /v1/admin/tenants/{id}/move). Every refusal changes nothing.
func (s *Server) adminMoveTenant(c echo.Context) error {
	p, req, err := operatorWrite[api.MoveTenantRequest](s, c)
	if err != nil {
		return err
	}
	if req.Pool == "" {
		return catalog.InvalidRequest.New("pool is required: the pool to move the tenant to")
	}
	if err := checkMoveRate(req.BytesPerSec); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := c.Param("id")
	var id int64
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		id, err = createTenantMove(ctx, tx, p, tenant, req)
		return err
	})
	if err := txError("move tenant", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusCreated, s.loadTenantMove, id)
}

// createTenantMove checks a move of tenant to pool, places it and stores
// it. The tenant's row is locked first, so its topic changes (lockTenant)
// and another move of it wait; the destination cell's row next.
func createTenantMove(ctx context.Context, tx pgx.Tx, p *principal, tenant string, req api.MoveTenantRequest) (int64, error) {
	pool := req.Pool
	var status, fromPool, source string
	err := tx.QueryRow(ctx, `SELECT status, pool_id, home_cell_id FROM tenants WHERE id = $1 FOR UPDATE`, tenant).
		Scan(&status, &fromPool, &source)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, catalog.NotFound.Newf("no such tenant %q", tenant)
	}
	if err != nil {
		return 0, err
	}
	var kind string
	err = tx.QueryRow(ctx, `SELECT kind FROM pools WHERE id = $1`, pool).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, catalog.NotFound.Newf("no such pool %q", pool)
	}
	if err != nil {
		return 0, err
	}
	switch {
	case fromPool == pool:
		return 0, catalog.InvalidRequest.Newf("tenant %s is already on pool %s (cell %s)", tenant, pool, source)
	case status != "active":
		return 0, catalog.TenantSuspended.Newf("tenant %s is %s; resume it before moving it", tenant, status)
	}
	var other int64
	var otherState string
	err = tx.QueryRow(ctx, `SELECT id, state FROM tenant_moves m WHERE tenant_id = $1 AND `+tmUnfinished, tenant).Scan(&other, &otherState)
	switch {
	case err == nil:
		return 0, catalog.AlreadyExists.Newf("tenant %s already has move %d (%s); wait for it to finish or cancel it", tenant, other, otherState)
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, err
	}
	var topic string
	var part int
	err = tx.QueryRow(ctx, `SELECT m.topic_id, m.partition, m.id FROM partition_moves m JOIN topics x ON x.id = m.topic_id
		WHERE x.tenant_id = $1 AND m.state IN ('running', 'cancelling', 'failed') ORDER BY m.id LIMIT 1`, tenant).Scan(&topic, &part, &other)
	switch {
	case err == nil:
		return 0, catalog.Unavailable.Newf("partition %d of topic %s has replica move %d unfinished; a tenant moves once it finishes (or is cancelled)", part, topic, other)
	case !errors.Is(err, pgx.ErrNoRows):
		return 0, err
	}
	dest, err := pickMoveCell(ctx, tx, pool, kind)
	if err != nil {
		return 0, err
	}
	for _, cell := range []string{source, dest} {
		if err := checkCellTenantMovable(ctx, tx, cell); err != nil {
			return 0, err
		}
	}
	rows, err := tx.Query(ctx, `SELECT p.topic_id, p.partition FROM partitions p JOIN topics x ON x.id = p.topic_id
		WHERE x.tenant_id = $1 ORDER BY p.topic_id, p.partition FOR UPDATE OF p`, tenant)
	if err != nil {
		return 0, err
	}
	type tp struct {
		topic string
		part  int
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tp, error) {
		var x tp
		return x, r.Scan(&x.topic, &x.part)
	})
	if err != nil {
		return 0, err
	}
	sets, _, err := replicaSets(ctx, tx, dest, len(parts), "cell "+dest)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO tenant_moves (tenant_id, source_cell_id, dest_cell_id, dest_pool_id, bytes_per_sec, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, tenant, source, dest, pool, req.BytesPerSec, p.actor()).Scan(&id); err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	for i, x := range parts {
		batch.Queue(`INSERT INTO tenant_move_partitions (move_id, topic_id, partition, replicas) VALUES ($1, $2, $3, $4)`,
			id, x.topic, x.part, sets[i])
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, err
	}
	if err := bumpCell(ctx, tx, source); err != nil {
		return 0, err
	}
	if err := bumpCell(ctx, tx, dest); err != nil {
		return 0, err
	}
	actor := *p
	actor.tenantID = tenant // the audit entry belongs to the moved tenant
	return id, audit(ctx, tx, &actor, "tenant.move", strconv.FormatInt(id, 10), map[string]any{"tenant_id": tenant,
		"source_cell": source, "dest_cell": dest, "pool": pool, "partitions": len(parts), "bytes_per_sec": req.BytesPerSec})
}

// pickMoveCell chooses the destination cell in pool: for a dedicated pool
// an active cell that holds no tenant and is no other move's destination;
// for a shared one the least loaded active cell, as signup places a
// tenant (pickSharedCell). The chosen cell's row stays locked.
func pickMoveCell(ctx context.Context, tx pgx.Tx, pool, kind string) (string, error) {
	if kind == "shared" {
		_, cell, err := pickCellOf(ctx, tx, pool)
		if errors.Is(err, catalog.NoCapacity.New("")) {
			return "", catalog.NoCapacity.Newf("no cell of shared pool %s is accepting tenants now (none active, or each has a broker above its disk watermark)", pool)
		}
		return cell, err
	}
	// Two moves to one dedicated pool at once take turns here: the row
	// lock alone would let the second still see the first's cell free.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice.tenant_moves'), hashtext($1))`, pool); err != nil {
		return "", err
	}
	var cell string
	err := tx.QueryRow(ctx, `SELECT c.id FROM cells c WHERE c.pool_id = $1 AND c.status = 'active'
		AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.home_cell_id = c.id)
		AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.dest_cell_id = c.id AND `+tmUnfinished+`)
		ORDER BY c.id LIMIT 1 FOR UPDATE OF c`, pool).Scan(&cell)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", catalog.NoCapacity.Newf("dedicated pool %s has no free cell (an active cell holding no tenant); add a cell to it first", pool)
	}
	return cell, err
}

// checkCellTenantMovable refuses a move from or to a cell with fewer than
// minLiveBrokers live brokers, a live broker whose reports do not say it
// takes part in tenant moves (it would ignore the mirror, the fence or
// the promotion), a broker without a Raft address (the other cell's
// mirrors could not dial it, and a mirror naming no source broker is a
// state the brokers refuse), or no peer CA (no other cell could
// authenticate its brokers, nor it the other's).
func checkCellTenantMovable(ctx context.Context, tx pgx.Tx, cell string) error {
	var live int
	var old, noRaft []string
	var ca string
	err := tx.QueryRow(ctx, `SELECT c.peer_ca, (SELECT count(*) FROM brokers b WHERE b.cell_id = c.id AND b.status <> 'offline'
			AND b.last_seen_at > now() - interval '`+liveBrokerWindow+`'),
		(SELECT coalesce(array_agg(b.id ORDER BY b.id), '{}') FROM brokers b WHERE b.cell_id = c.id AND b.status <> 'offline'
			AND b.last_seen_at > now() - interval '`+liveBrokerWindow+`' AND NOT b.reports_moves),
		(SELECT coalesce(array_agg(b.id ORDER BY b.id), '{}') FROM brokers b WHERE b.cell_id = c.id AND b.status <> 'offline'
			AND b.raft_addr = '')
		FROM cells c WHERE c.id = $1`, cell).Scan(&ca, &live, &old, &noRaft)
	if err != nil {
		return err
	}
	switch {
	case live < minLiveBrokers:
		return catalog.NotEnoughReplicas.Newf("cell %s has %d live brokers (reported within the last %s); a tenant move needs at least %d",
			cell, live, liveBrokerWindow, minLiveBrokers)
	case len(old) > 0:
		return catalog.Unavailable.Newf("broker %s of cell %s does not report tenant moves (a broker without them); upgrade it before moving a tenant from or to the cell",
			old[0], cell)
	case len(noRaft) > 0:
		return catalog.Unavailable.Newf("broker %s of cell %s has no Raft address registered; the other cell's mirrors could not reach it", noRaft[0], cell)
	case ca == "":
		return catalog.Unavailable.Newf("cell %s has no peer CA: its brokers registered without transport TLS, so no other cell can authenticate them; a tenant moves only between cells with one", cell)
	}
	return nil
}

// adminCancelTenantMove rolls a move back before promoting (POST
// /v1/admin/tenant-moves/{id}/cancel): the source unfences, the grants
// and the destination's mirrors go, the destination placement is
// dropped. From promoting on the destination may hold promoted
// partitions that took writes, so the only way back is a new move.
func (s *Server) adminCancelTenantMove(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	id, err := tenantMoveID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var tenant, source, dest, state string
		err := tx.QueryRow(ctx, `SELECT tenant_id, source_cell_id, dest_cell_id, state FROM tenant_moves WHERE id = $1 FOR UPDATE`, id).
			Scan(&tenant, &source, &dest, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such tenant move")
		}
		if err != nil {
			return err
		}
		switch state {
		case tmMirroring, tmFencing:
		case tmDone, tmCancelled:
			return catalog.InvalidRequest.Newf("tenant move %d is %s; only an unfinished move before promoting can be cancelled", id, state)
		default:
			return catalog.InvalidRequest.Newf("tenant move %d is %s: the destination may already serve writes, so it cannot be rolled back; once it is done, a move back is a new move", id, state)
		}
		if _, err := tx.Exec(ctx, `UPDATE tenant_moves SET state = 'cancelled', error = '', updated_at = now(), finished_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tenant_move_partitions WHERE move_id = $1`, id); err != nil {
			return err
		}
		if err := bumpCell(ctx, tx, source); err != nil {
			return err
		}
		actor := *p
		actor.tenantID = tenant
		return bumpCellAndAudit(ctx, tx, dest, &actor, "tenant.move.cancel", strconv.FormatInt(id, 10), map[string]any{"state": state})
	})
	if err := txError("cancel tenant move", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadTenantMove, id)
}

// halfRates halves a tenant's cell-wide rate quotas (rounding up, never
// below 1) for each of two cells that serve it at once during a move, so
// the two together allow what one did.
func halfRates(q *wire.Quotas) {
	half := func(v int64) int64 { return max((v+1)/2, 1) }
	q.ProduceBytesPerSec = half(q.ProduceBytesPerSec)
	q.ProduceMessagesPerSec = half(q.ProduceMessagesPerSec)
	q.FetchBytesPerSec = half(q.FetchBytesPerSec)
	q.MaxRequestsPerSec = int(half(int64(q.MaxRequestsPerSec)))
}

// committedOffsets decodes a move's group_offsets.
func committedOffsets(b []byte) ([]wire.CommittedOffset, error) {
	var out []wire.CommittedOffset
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// refuseWhileMoving refuses a change of a tenant's topics or partitions
// while it has an unfinished move: the move's destination placement and
// mirrors were fixed when it started. The caller holds the tenant's row.
func refuseWhileMoving(ctx context.Context, tx pgx.Tx, tenant string) error {
	var id int64
	var state string
	err := tx.QueryRow(ctx, `SELECT id, state FROM tenant_moves m WHERE tenant_id = $1 AND `+tmUnfinished, tenant).Scan(&id, &state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return catalog.Unavailable.Newf("the tenant is moving to another cell (move %d, %s); topic and partition changes wait until it is done", id, state)
}

// refuseTenantMoving refuses a replica move of a topic partition whose
// tenant moves to another cell: the move's destination placement was
// fixed when it started, and the switch replaces the partition's replicas.
func refuseTenantMoving(ctx context.Context, tx pgx.Tx, topicID string) error {
	if topicID == offsetsTopicID {
		return nil
	}
	var id int64
	err := tx.QueryRow(ctx, `SELECT m.id FROM tenant_moves m JOIN topics x ON x.tenant_id = m.tenant_id
		WHERE x.id = $1 AND `+tmUnfinished, topicID).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return catalog.Unavailable.Newf("topic %s belongs to a tenant moving to another cell (tenant move %d); its replicas move once that is done", topicID, id)
}
