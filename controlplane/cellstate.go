package controlplane

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
)

// The internal cell API: brokers long-poll their cell's desired state and
// report what they observe. Brokers authenticate with a cell key.

const (
	defaultStateWait = 30 * time.Second
	maxStateWait     = 60 * time.Second
)

func (s *Server) adminCreateCellKey(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	cell := c.Param("id")
	id, secret := credential.NewCellKey()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "cells", cell, "cell"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO cell_keys (id, cell_id, secret_hash) VALUES ($1, $2, $3)`,
			id, cell, credential.HashSecret(secret)); err != nil {
			return err
		}
		return audit(ctx, tx, p, "cell_key.create", id, map[string]any{"cell": cell})
	})
	if err := txError("create cell key", err); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.CellKey{ID: id, CellID: cell, Secret: secret})
}

// cellWrite authorizes a cell's broker by its cell key and decodes its
// request body into a T: the start of every internal route that takes a
// body as it comes (the key-home lookup rate-limits before decoding).
func cellWrite[T any](s *Server, c echo.Context) (string, T, error) {
	var req T
	cell, err := s.cellCaller(c)
	if err != nil {
		return "", req, err
	}
	return cell, req, s.bind(c, &req)
}

// cellCaller checks a cell key against the cell named in the path.
func (s *Server) cellCaller(c echo.Context) (string, error) {
	cell := c.Param("cell")
	keyCell, err := s.cellKeyCell(c.Request().Context(), c.Request().Header.Get(echo.HeaderAuthorization))
	if err != nil {
		return "", err
	}
	if keyCell != cell {
		return "", catalog.PermissionDenied.New("this key belongs to another cell")
	}
	return cell, nil
}

// cellKeyCell checks an Authorization header holding a cell key and
// returns the key's cell.
func (s *Server) cellKeyCell(ctx context.Context, header string) (string, error) {
	scheme, cred, _ := strings.Cut(header, " ")
	raw, err := base64.StdEncoding.DecodeString(cred)
	if !strings.EqualFold(scheme, "basic") || err != nil {
		return "", catalog.Unauthenticated.New("send Authorization: Basic <cell key id:secret>")
	}
	id, secret, _ := strings.Cut(string(raw), ":")
	if !credential.ValidCellKeyID(id) {
		return "", catalog.Unauthenticated.New("the cell key is wrong")
	}
	var hash []byte
	var keyCell string
	err = s.db.QueryRow(ctx, `SELECT secret_hash, cell_id FROM cell_keys WHERE id = $1 AND revoked_at IS NULL`, id).
		Scan(&hash, &keyCell)
	if errors.Is(err, pgx.ErrNoRows) {
		credential.CheckSecret(make([]byte, 32), secret)
		return "", catalog.Unauthenticated.New("the cell key is wrong")
	}
	if err != nil {
		return "", dbError("look up cell key", err)
	}
	if !credential.CheckSecret(hash, secret) {
		return "", catalog.Unauthenticated.New("the cell key is wrong")
	}
	return keyCell, nil
}

// cellState answers with the cell's desired state once its version exceeds
// ?after, waiting up to ?wait (a Go duration, at most 60 s); 304 when it did
// not change in time. It reads the version again when a transaction
// notifies a cell-state change (statenotify.go) and every CellStatePoll.
func (s *Server) cellState(c echo.Context) error {
	cell, err := s.cellCaller(c)
	if err != nil {
		return err
	}
	after := int64(-1)
	if v := c.QueryParam("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil {
			return catalog.InvalidRequest.New("after must be a state version (a whole number)")
		}
	}
	wait := defaultStateWait
	if v := c.QueryParam("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > maxStateWait {
			return catalog.InvalidRequest.Newf("wait must be a duration from 0s to %s", maxStateWait)
		}
	}
	ctx := c.Request().Context()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(s.cfg.CellStatePoll)
	defer tick.Stop()
	defer s.stateChanges.join()()
	for {
		changed := s.stateChanges.next() // before the read, so no notification falls between
		if err := s.expireThrottles(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("expire tenant throttles", "err", err)
		}
		var version int64
		if err := s.db.QueryRow(ctx, `SELECT state_version FROM cells WHERE id = $1`, cell).Scan(&version); err != nil {
			return dbError("read cell version", err)
		}
		if version > after {
			st, err := s.loadCellState(ctx, cell)
			if err != nil {
				return dbError("load cell state", err)
			}
			return c.JSON(http.StatusOK, st)
		}
		select {
		case <-deadline.C:
			return c.NoContent(http.StatusNotModified)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-changed:
		}
	}
}

// loadCellState reads a consistent snapshot of the cell's desired state.
func (s *Server) loadCellState(ctx context.Context, cell string) (wire.CellState, error) {
	st := wire.CellState{Version: wire.Version, Cell: cell, GeneratedAt: s.cfg.Now().UTC(),
		Brokers: []wire.Broker{}, Tenants: []wire.Tenant{}, Keys: []wire.Key{}, ACLs: []wire.ACL{}, Topics: []wire.Topic{}}
	err := pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT state_version FROM cells WHERE id = $1`, cell).Scan(&st.StateVersion); err != nil {
			return err
		}
		// Tenants moving here are served beside those homed here
		// (tenantmove_state.go); incoming is never nil.
		moves, err := loadCellTenantMoves(ctx, tx, cell)
		if err != nil {
			return err
		}
		incoming := moves.incoming(cell)
		rows, _ := tx.Query(ctx, `SELECT id, node_id, kafka_addr, http_addr, raft_addr, status FROM brokers WHERE cell_id = $1 ORDER BY node_id`, cell)
		if st.Brokers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Broker, error) {
			var b wire.Broker
			return b, r.Scan(&b.ID, &b.NodeID, &b.KafkaAddr, &b.HTTPAddr, &b.RaftAddr, &b.Status)
		}); err != nil {
			return err
		}
		quotas := map[string]api.Quotas{}
		rows, _ = tx.Query(ctx, `SELECT t.id, t.name, t.status, t.plan, `+quotaColumns+` FROM tenants t
			JOIN effective_quotas q ON q.tenant_id = t.id WHERE (t.home_cell_id = $1 OR t.id = ANY($2)) ORDER BY t.id`, cell, incoming)
		if st.Tenants, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Tenant, error) {
			var t wire.Tenant
			var q api.Quotas
			err := r.Scan(append([]any{&t.ID, &t.Name, &t.Status, &t.Plan}, quotaFields(&q)...)...)
			quotas[t.ID] = q
			t.Quotas = wire.Quotas{ProduceBytesPerSec: q.ProduceBytesPerSec, ProduceMessagesPerSec: q.ProduceMessagesPerSec,
				FetchBytesPerSec: q.FetchBytesPerSec, MaxPartitions: q.MaxPartitions, MaxTopics: q.MaxTopics,
				MaxConnections: q.MaxConnections, MaxStorageBytes: q.MaxStorageBytes, MaxMessageBytes: q.MaxMessageBytes,
				MaxRequestsPerSec: q.MaxRequestsPerSec}
			return t, err
		}); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, `SELECT k.id, k.tenant_id, k.role, k.secret_hash, k.expires_at, coalesce(k.scram_credentials, '[]') FROM api_keys k
			JOIN tenants t ON t.id = k.tenant_id WHERE (t.home_cell_id = $1 OR t.id = ANY($2)) AND k.revoked_at IS NULL ORDER BY k.id`, cell, incoming)
		if st.Keys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Key, error) {
			var k wire.Key
			if err := r.Scan(&k.ID, &k.TenantID, &k.Role, &k.SecretHash, &k.ExpiresAt, &k.Scram); err != nil {
				return k, err
			}
			if len(k.Scram) == 0 {
				k.Scram = nil
			}
			return k, nil
		}); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, `SELECT a.tenant_id, a.principal, a.resource_type, a.resource_name, a.pattern_type, a.operation, a.permission
			FROM acls a JOIN tenants t ON t.id = a.tenant_id WHERE (t.home_cell_id = $1 OR t.id = ANY($2)) ORDER BY a.id`, cell, incoming)
		if st.ACLs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.ACL, error) {
			var a wire.ACL
			return a, r.Scan(&a.TenantID, &a.Principal, &a.ResourceType, &a.ResourceName, &a.PatternType, &a.Operation, &a.Permission)
		}); err != nil {
			return err
		}
		// A partition with an unfinished move is published as the move
		// says (publishMove); partitions.replicas keeps the original.
		rows, _ = tx.Query(ctx, `SELECT x.id, x.tenant_id, x.name, x.config, p.partition, p.replicas, m.state, m.target, m.voters
			FROM topics x JOIN tenants t ON t.id = x.tenant_id JOIN partitions p ON p.topic_id = x.id
			LEFT JOIN partition_moves m ON m.topic_id = p.topic_id AND m.partition = p.partition AND m.state IN ('running', 'cancelling', 'failed')
			WHERE (t.home_cell_id = $1 OR t.id = ANY($2)) ORDER BY x.id, p.partition`, cell, incoming)
		type row struct {
			topic wire.Topic
			part  wire.Partition
		}
		prs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			var state *string
			var target, voters []int
			if err := r.Scan(&x.topic.ID, &x.topic.TenantID, &x.topic.Name, &x.topic.Config, &x.part.Partition, &x.part.Replicas,
				&state, &target, &voters); err != nil {
				return x, err
			}
			if state != nil {
				x.part.Replicas, x.part.Adding, x.part.Removing = publishMove(*state, x.part.Replicas, target, voters)
			}
			return x, nil
		})
		if err != nil {
			return err
		}
		for _, x := range prs {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].ID != x.topic.ID {
				x.topic.Explicit = slices.Sorted(maps.Keys(x.topic.Config))
				x.topic.Config = topicspec.Effective(x.topic.Config, quotas[x.topic.TenantID])
				st.Topics = append(st.Topics, x.topic)
			}
			t := &st.Topics[len(st.Topics)-1]
			t.Partitions = append(t.Partitions, x.part)
		}
		// The offsets placement, once the control plane has taken it
		// over (offsets.go); absent, brokers compute their own.
		rows, _ = tx.Query(ctx, `SELECT o.partition, o.replicas, m.state, m.target, m.voters FROM offsets_placements o
			LEFT JOIN partition_moves m ON m.cell_id = o.cell_id AND m.topic_id = '`+offsetsTopicID+`' AND m.partition = o.partition
				AND m.state IN ('running', 'cancelling', 'failed')
			WHERE o.cell_id = $1 ORDER BY o.partition`, cell)
		st.Offsets, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Partition, error) {
			var p wire.Partition
			var state *string
			var target, voters []int
			if err := r.Scan(&p.Partition, &p.Replicas, &state, &target, &voters); err != nil {
				return p, err
			}
			if state != nil {
				p.Replicas, p.Adding, p.Removing = publishMove(*state, p.Replicas, target, voters)
			}
			return p, nil
		})
		if err != nil {
			return err
		}
		return applyTenantMoves(ctx, tx, &st, moves)
	})
	return st, err
}

// cellReport stores a broker's observations: its disk, its replicas, and the
// lag of the groups it coordinates.
func (s *Server) cellReport(c echo.Context) error {
	cell, r, err := cellWrite[wire.Report](s, c)
	if err != nil {
		return err
	}
	if r.Version != wire.Version {
		return catalog.InvalidRequest.Newf("report version %d; this control plane speaks %d", r.Version, wire.Version)
	}
	switch r.DiskState {
	case "":
		r.DiskState = "ok" // brokers that do not report watermarks
	case "ok", "soft", "hard":
	default:
		return catalog.InvalidRequest.Newf("disk_state %q: want ok, soft or hard", r.DiskState)
	}
	switch r.HTTPScheme {
	case "":
		r.HTTPScheme = "http" // brokers that do not report it
	case "http", "https":
	default:
		return catalog.InvalidRequest.Newf("http_scheme %q: want http or https", r.HTTPScheme)
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// reports_voters: the broker's version reports Raft
		// configurations, so some replica reported carries one
		// (vacuously so for a broker that holds none yet). A replica
		// without one is new, before its first configuration, or joining
		// (joinersExcused covers a broker whose replicas all join).
		reportsVoters := len(r.Partitions) == 0
		for _, p := range r.Partitions {
			reportsVoters = reportsVoters || len(p.Voters) > 0
		}
		var node int
		err := tx.QueryRow(ctx, `UPDATE brokers SET disk_used_bytes = $3, disk_total_bytes = $4, disk_state = $5, http_scheme = $6,
			reports_voters = $7, reports_moves = $8, last_seen_at = now() WHERE id = $1 AND cell_id = $2 RETURNING node_id`,
			r.BrokerID, cell, r.DiskUsedBytes, r.DiskTotalBytes, r.DiskState, r.HTTPScheme, reportsVoters, r.Moves).Scan(&node)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such broker in this cell")
		}
		if err != nil {
			return err
		}
		// The cell's tenant moves are locked before any cell row is
		// (lockTenantMoves) and advanced last, after the group lag.
		tenantMoves, err := lockTenantMoves(ctx, tx, cell)
		if err != nil {
			return err
		}
		if !reportsVoters {
			if err := joinersExcused(ctx, tx, cell, r.BrokerID, node, r.Partitions); err != nil {
				return err
			}
		}
		batch := &pgx.Batch{}
		for _, p := range r.Partitions {
			// Replicas of partitions deleted since the broker's last state are skipped.
			batch.Queue(`INSERT INTO partition_status (topic_id, partition, broker_id, leader_node, leader_epoch,
				log_start_offset, log_end_offset, high_watermark, size_bytes, reported_at)
				SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, now()
				WHERE EXISTS (SELECT 1 FROM partitions WHERE topic_id = $1 AND partition = $2 AND cell_id = $10)
				ON CONFLICT (topic_id, partition, broker_id) DO UPDATE SET leader_node = $4, leader_epoch = $5,
				log_start_offset = $6, log_end_offset = $7, high_watermark = $8, size_bytes = $9, reported_at = now()`,
				p.TopicID, p.Partition, r.BrokerID, p.LeaderNode, p.LeaderEpoch, p.LogStartOffset, p.LogEndOffset,
				p.HighWatermark, p.SizeBytes, cell)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if err := s.ingestMoves(ctx, tx, cell, r.BrokerID, node, r.Partitions); err != nil {
			return err
		}
		if len(r.KeysUsed) > 0 {
			// Only keys of the cell's own tenants, at most once a minute
			// as for /v1 calls.
			if _, err := tx.Exec(ctx, `UPDATE api_keys k SET last_used_at = $3::timestamptz FROM tenants t
				WHERE k.id = ANY($1) AND t.id = k.tenant_id AND t.home_cell_id = $2
				AND (k.last_used_at IS NULL OR k.last_used_at < $3::timestamptz - interval '1 minute')`,
				r.KeysUsed, cell, s.cfg.Now()); err != nil {
				return err
			}
		}
		skipped, err := storeGroupLag(ctx, tx, cell, r.BrokerID, r.Groups)
		if skipped > 0 {
			s.log.Warn("report has group lag rows that cannot be stored", "cell", cell, "broker", r.BrokerID, "skipped", skipped)
		}
		if err != nil {
			return err
		}
		return s.ingestTenantMoves(ctx, tx, cell, r.BrokerID, node, r, tenantMoves)
	})
	if err := txError("store report", err); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
