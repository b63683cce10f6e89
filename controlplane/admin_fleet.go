package controlplane

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// Pools, cells and brokers: the fleet that tenants are placed on. Only
// platform operators see or change it.

const poolSelect = `SELECT p.id, p.kind, p.description, (SELECT count(*) FROM cells c WHERE c.pool_id = p.id), p.created_at FROM pools p`

func scanPool(row pgx.Row) (api.Pool, error) {
	var p api.Pool
	return p, row.Scan(&p.ID, &p.Kind, &p.Description, &p.Cells, &p.CreatedAt)
}

func (s *Server) adminListPools(c echo.Context) error {
	pg, err := s.operatorPage(c)
	if err != nil {
		return err
	}
	return listPage(c, s, "list pools", pg, scanPool,
		func(p api.Pool) string { return p.ID },
		poolSelect+` WHERE p.id > $1 ORDER BY p.id LIMIT $2`, pg.after, pg.limit+1)
}

func (s *Server) adminGetPool(c echo.Context) error { return operatorGet(s, c, s.loadPool) }

func (s *Server) loadPool(ctx context.Context, id string) (api.Pool, error) {
	p, err := scanPool(s.db.QueryRow(ctx, poolSelect+` WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Pool{}, catalog.NotFound.New("no such pool")
	}
	if err != nil {
		return api.Pool{}, dbError("load pool", err)
	}
	return p, nil
}

func (s *Server) adminCreatePool(c echo.Context) error {
	p, req, err := operatorWrite[api.CreatePoolRequest](s, c)
	if err != nil {
		return err
	}
	if err := validFleetID("pool", req.ID); err != nil {
		return err
	}
	if req.Kind != "shared" && req.Kind != "dedicated" {
		return catalog.InvalidRequest.New(`kind must be "shared" or "dedicated"`)
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := insertNew(ctx, tx, catalog.AlreadyExists.New("a pool with that id already exists"),
			`INSERT INTO pools (id, kind, description) VALUES ($1, $2, $3)`, req.ID, req.Kind, req.Description); err != nil {
			return err
		}
		return audit(ctx, tx, p, "pool.create", req.ID, map[string]any{"kind": req.Kind})
	})
	if err := txError("create pool", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusCreated, s.loadPool, req.ID)
}

const cellSelect = `SELECT c.id, c.pool_id, c.status, c.state_version,
	(SELECT count(*) FROM tenants t WHERE t.home_cell_id = c.id),
	(SELECT count(*) FROM partitions x WHERE x.cell_id = c.id), c.created_at FROM cells c`

func (s *Server) loadCells(ctx context.Context, where string, args ...any) ([]api.Cell, error) {
	rows, err := s.db.Query(ctx, cellSelect+" "+where, args...)
	if err != nil {
		return nil, err
	}
	cells, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Cell, error) {
		var c api.Cell
		return c, r.Scan(&c.ID, &c.PoolID, &c.Status, &c.StateVersion, &c.Tenants, &c.Partitions, &c.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	for i := range cells {
		if cells[i].Brokers, err = s.loadBrokers(ctx, `WHERE cell_id = $1 ORDER BY node_id`, cells[i].ID); err != nil {
			return nil, err
		}
	}
	return cells, nil
}

func (s *Server) adminListCells(c echo.Context) error {
	return operatorList(s, c, "list cells", s.loadCells, `WHERE c.id > $1 ORDER BY c.id LIMIT $2`, func(c api.Cell) string { return c.ID })
}

// operatorList answers a platform operator's list with one page of what
// load finds by where, a keyset query on the page's after and limit+1.
func operatorList[T any](s *Server, c echo.Context, op string, load func(ctx context.Context, where string, args ...any) ([]T, error),
	where string, key func(T) string) error {
	pg, err := s.operatorPage(c)
	if err != nil {
		return err
	}
	all, err := load(c.Request().Context(), where, pg.after, pg.limit+1)
	if err != nil {
		return dbError(op, err)
	}
	items, next := trim(pg, all, key)
	return c.JSON(http.StatusOK, api.Page[T]{Items: items, NextPageToken: next})
}

// only is the one item a load by id found, NotFound ("no such what") if
// it found none.
func only[T any](what string, items []T, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, dbError("load "+what, err)
	}
	if len(items) == 0 {
		return zero, catalog.NotFound.New("no such " + what)
	}
	return items[0], nil
}

// mustExist refuses with NotFound ("no such what") unless table has a row
// with the id: the parent a new pool member or cell member names, or the
// tenant or cell a request's path names.
func mustExist(ctx context.Context, q querier, table, id, what string) error {
	var ok bool
	err := q.QueryRow(ctx, `SELECT true FROM `+table+` WHERE id = $1`, id).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NotFound.New("no such " + what)
	}
	return err
}

func (s *Server) adminGetCell(c echo.Context) error { return operatorGet(s, c, s.loadCell) }

func (s *Server) loadCell(ctx context.Context, id string) (api.Cell, error) {
	cells, err := s.loadCells(ctx, `WHERE c.id = $1`, id)
	return only("cell", cells, err)
}

func (s *Server) adminCreateCell(c echo.Context) error {
	p, req, err := operatorWrite[api.CreateCellRequest](s, c)
	if err != nil {
		return err
	}
	if err := validFleetID("cell", req.ID); err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "pools", req.PoolID, "pool"); err != nil {
			return err
		}
		if err := insertNew(ctx, tx, catalog.AlreadyExists.New("a cell with that id already exists"),
			`INSERT INTO cells (id, pool_id) VALUES ($1, $2)`, req.ID, req.PoolID); err != nil {
			return err
		}
		return audit(ctx, tx, p, "cell.create", req.ID, map[string]any{"pool": req.PoolID})
	})
	if err := txError("create cell", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusCreated, s.loadCell, req.ID)
}

const brokerColumns = `id, cell_id, node_id, kafka_addr, http_addr, raft_addr, status, disk_used_bytes, disk_total_bytes, disk_state, last_seen_at, created_at`

func (s *Server) loadBrokers(ctx context.Context, where string, args ...any) ([]api.Broker, error) {
	rows, err := s.db.Query(ctx, `SELECT `+brokerColumns+` FROM brokers `+where, args...)
	if err != nil {
		return nil, err
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Broker, error) {
		var b api.Broker
		return b, r.Scan(&b.ID, &b.CellID, &b.NodeID, &b.KafkaAddr, &b.HTTPAddr, &b.RaftAddr, &b.Status,
			&b.DiskUsedBytes, &b.DiskTotalBytes, &b.DiskState, &b.LastSeenAt, &b.CreatedAt)
	})
	if bs == nil {
		bs = []api.Broker{}
	}
	return bs, err
}

func (s *Server) adminListBrokers(c echo.Context) error {
	return operatorList(s, c, "list brokers", s.loadBrokers, `WHERE id > $1 ORDER BY id LIMIT $2`, func(b api.Broker) string { return b.ID })
}

func (s *Server) loadBroker(ctx context.Context, id string) (api.Broker, error) {
	bs, err := s.loadBrokers(ctx, `WHERE id = $1`, id)
	return only("broker", bs, err)
}

func (s *Server) adminGetBroker(c echo.Context) error { return operatorGet(s, c, s.loadBroker) }

func (s *Server) adminCreateBroker(c echo.Context) error {
	p, req, err := operatorWrite[api.CreateBrokerRequest](s, c)
	if err != nil {
		return err
	}
	if err := validBroker(req.ID, req.NodeID); err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := mustExist(ctx, tx, "cells", req.CellID, "cell"); err != nil {
			return err
		}
		if err := insertNew(ctx, tx, catalog.AlreadyExists.New("a broker with that id, or that node id in the cell, already exists"),
			`INSERT INTO brokers (id, cell_id, node_id, kafka_addr, http_addr, raft_addr)
			VALUES ($1, $2, $3, $4, $5, $6)`, req.ID, req.CellID, req.NodeID, req.KafkaAddr, req.HTTPAddr, req.RaftAddr); err != nil {
			return err
		}
		if err := bumpCell(ctx, tx, req.CellID); err != nil {
			return err
		}
		return audit(ctx, tx, p, "broker.create", req.ID, map[string]any{"cell": req.CellID, "node_id": req.NodeID})
	})
	if err := txError("create broker", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusCreated, s.loadBroker, req.ID)
}

func (s *Server) adminUpdateBroker(c echo.Context) error {
	p, req, err := operatorWrite[api.UpdateBrokerRequest](s, c)
	if err != nil {
		return err
	}
	if req.Status != nil && *req.Status != "active" && *req.Status != "draining" && *req.Status != "offline" {
		return catalog.InvalidRequest.New(`status must be "active", "draining" or "offline"`)
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var cell string
		err := tx.QueryRow(ctx, `UPDATE brokers SET kafka_addr = coalesce($2, kafka_addr), http_addr = coalesce($3, http_addr),
			raft_addr = coalesce($4, raft_addr), status = coalesce($5, status) WHERE id = $1 RETURNING cell_id`,
			id, req.KafkaAddr, req.HTTPAddr, req.RaftAddr, req.Status).Scan(&cell)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such broker")
		}
		if err != nil {
			return err
		}
		return bumpCellAndAudit(ctx, tx, cell, p, "broker.update", id, map[string]any{"request": req})
	})
	if err := txError("update broker", err); err != nil {
		return err
	}
	return answerLoaded(c, http.StatusOK, s.loadBroker, id)
}

// adminDeleteBroker removes a broker that holds no partition replicas
// (topic or offsets partitions) and that no unfinished move puts a
// replica on.
func (s *Server) adminDeleteBroker(c echo.Context) error {
	p, err := s.operatorCaller(c, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var cell string
		var node, replicas int
		err := tx.QueryRow(ctx, `SELECT cell_id, node_id FROM brokers WHERE id = $1 FOR UPDATE`, id).Scan(&cell, &node)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotFound.New("no such broker")
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM partitions WHERE cell_id = $1 AND $2 = ANY(replicas)`, cell, node).Scan(&replicas); err != nil {
			return err
		}
		if replicas > 0 {
			return catalog.InvalidRequest.Newf("the broker holds %d partition replicas; move them first (tenantd admin brokers drain)", replicas)
		}
		placement, _, err := offsetsPlacement(ctx, tx, cell, s.cfg.OffsetsPartitions)
		if err != nil {
			return err
		}
		for part, r := range placement {
			if slices.Contains(r, node) {
				return catalog.InvalidRequest.Newf("the broker holds offsets partition %d of the cell; move it first (tenantd admin brokers drain)", part)
			}
		}
		var move int64
		err = tx.QueryRow(ctx, `SELECT id FROM partition_moves WHERE cell_id = $1 AND $2 = ANY(target)
			AND state IN ('running', 'cancelling', 'failed') ORDER BY id LIMIT 1`, cell, node).Scan(&move)
		if err == nil {
			return catalog.InvalidRequest.Newf("unfinished move %d puts a replica on the broker; wait for it or cancel it first", move)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM brokers WHERE id = $1`, id); err != nil {
			return err
		}
		return bumpCellAndAudit(ctx, tx, cell, p, "broker.delete", id, nil)
	})
	if err := txError("delete broker", err); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// cellRegisterBroker is a broker registering itself with its cell key: it
// adds the broker to the cell, or updates the addresses of the broker of
// that id and node id, so brokers whose addresses come from where they run
// (a StatefulSet pod's DNS name) need no operator call per broker.
func (s *Server) cellRegisterBroker(c echo.Context) error {
	cell, r, err := cellWrite[wire.Registration](s, c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if err := validBroker(id, r.NodeID); err != nil {
		return err
	}
	p := &principal{kind: "api_key", keyID: "cell-key@" + cell}
	ctx := c.Request().Context()
	status := http.StatusOK
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if err := recordPeerCA(ctx, tx, cell, r.PeerCA); err != nil {
			return err
		}
		var node int
		var kafka, httpAddr, raft, owner string
		err := tx.QueryRow(ctx, `SELECT cell_id, node_id, kafka_addr, http_addr, raft_addr FROM brokers WHERE id = $1 FOR UPDATE`, id).
			Scan(&owner, &node, &kafka, &httpAddr, &raft)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if err := insertNew(ctx, tx, catalog.AlreadyExists.Newf("another broker of the cell has node id %d", r.NodeID),
				`INSERT INTO brokers (id, cell_id, node_id, kafka_addr, http_addr, raft_addr)
				VALUES ($1, $2, $3, $4, $5, $6)`, id, cell, r.NodeID, r.KafkaAddr, r.HTTPAddr, r.RaftAddr); err != nil {
				return err
			}
			status = http.StatusCreated
			return bumpCellAndAudit(ctx, tx, cell, p, "broker.register", id, map[string]any{"cell": cell, "node_id": r.NodeID})
		case err != nil:
			return err
		case owner != cell:
			return catalog.PermissionDenied.New("the broker belongs to another cell")
		case node != r.NodeID:
			return catalog.AlreadyExists.Newf("the broker is registered with node id %d, not %d", node, r.NodeID)
		}
		want := [3]string{cmp.Or(r.KafkaAddr, kafka), cmp.Or(r.HTTPAddr, httpAddr), cmp.Or(r.RaftAddr, raft)}
		if want == [3]string{kafka, httpAddr, raft} {
			return nil // nothing changed: the cell keeps its version
		}
		if _, err := tx.Exec(ctx, `UPDATE brokers SET kafka_addr = $2, http_addr = $3, raft_addr = $4 WHERE id = $1`,
			id, want[0], want[1], want[2]); err != nil {
			return err
		}
		return bumpCellAndAudit(ctx, tx, cell, p, "broker.register", id, map[string]any{"kafka_addr": want[0], "http_addr": want[1], "raft_addr": want[2]})
	})
	if err := txError("register broker", err); err != nil {
		return err
	}
	return answerLoaded(c, status, s.loadBroker, id)
}
