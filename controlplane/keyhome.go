package controlplane

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
)

// Key lookups of one cell's brokers: a broker asks when a Kafka client
// presents an API key its own cell does not know, so every lookup may be an
// attacker's guess. Brokers cache answers and limit themselves; this limit
// caps what one cell can cost the control plane even if its brokers do not.
const (
	keyHomeEvery = 20 * time.Millisecond // 50 lookups per second per cell
	keyHomeBurst = 200
)

// keyHome answers POST /internal/v1/cells/{cell}/key-home: whether the
// presented key id and secret are a valid API key and, if so, the tenant's
// home cell with its brokers and the tenant's topics with their current
// leaders. The secret is checked here, not on the broker, so a cell never
// holds the key hashes of another cell's tenants; an unknown key, a revoked
// one and a wrong secret all answer "invalid", after the same hashing work.
func (s *Server) keyHome(c echo.Context) error {
	cell, err := s.cellCaller(c)
	if err != nil {
		return err
	}
	if ok, wait := s.keyHomes.allow(c.Request().Context(), cell); !ok {
		return rateLimited(wait, "too many key lookups from this cell; retry later")
	}
	var req wire.KeyHomeRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	home, err := s.lookupKeyHome(ctx, req.KeyID, req.Secret)
	if err != nil {
		return dbError("look up key home", err)
	}
	return c.JSON(http.StatusOK, home)
}

func (s *Server) lookupKeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	invalid := wire.KeyHome{Status: wire.KeyInvalid}
	if !credential.ValidKeyID(keyID) {
		credential.CheckSecret(make([]byte, 32), secret)
		return invalid, nil
	}
	var (
		hash                             []byte
		tenant, role, tenantStatus, cell string
		expires                          *time.Time
	)
	// Operator keys have no tenant and never authenticate Kafka clients.
	err := s.db.QueryRow(ctx, `SELECT k.secret_hash, k.tenant_id, k.role, k.expires_at, t.status, t.home_cell_id
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.id = $1 AND k.revoked_at IS NULL`, keyID).
		Scan(&hash, &tenant, &role, &expires, &tenantStatus, &cell)
	if errors.Is(err, pgx.ErrNoRows) {
		credential.CheckSecret(make([]byte, 32), secret)
		return invalid, nil
	}
	if err != nil {
		return invalid, err
	}
	switch {
	case !credential.CheckSecret(hash, secret):
		return invalid, nil
	case expires != nil && !s.cfg.Now().Before(*expires):
		return wire.KeyHome{Status: wire.KeyExpired}, nil
	case tenantStatus != "active":
		return wire.KeyHome{Status: wire.KeySuspended}, nil
	}
	home := wire.KeyHome{Status: wire.KeyValid, TenantID: tenant, Role: role, Cell: cell,
		Brokers: []wire.HomeNode{}, Topics: []wire.HomeTopic{}}
	err = pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT node_id, kafka_addr, http_addr, http_scheme FROM brokers WHERE cell_id = $1 AND kafka_addr <> '' ORDER BY node_id`, cell)
		var err error
		if home.Brokers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.HomeNode, error) {
			var b wire.HomeNode
			err := r.Scan(&b.NodeID, &b.KafkaAddr, &b.HTTPAddr, &b.HTTPScheme)
			if b.HTTPAddr == "" {
				b.HTTPScheme = "" // no data API to follow the tenant to
			}
			return b, err
		}); err != nil {
			return err
		}
		acl, err := s.keyACL(ctx, tx, tenant, keyID, role)
		if err != nil {
			return err
		}
		// The leader is the one reported with the newest epoch: a broker
		// that stopped reporting leaves an older epoch behind.
		rows, _ = tx.Query(ctx, `SELECT x.name, p.partition, p.replicas, COALESCE(s.leader_node, 0), COALESCE(s.leader_epoch, -1)
			FROM topics x JOIN partitions p ON p.topic_id = x.id
			LEFT JOIN LATERAL (SELECT leader_node, leader_epoch FROM partition_status ps
				WHERE ps.topic_id = p.topic_id AND ps.partition = p.partition AND ps.leader_node > 0
				ORDER BY ps.leader_epoch DESC, ps.reported_at DESC LIMIT 1) s ON true
			WHERE x.tenant_id = $1 ORDER BY x.name, p.partition`, tenant)
		type row struct {
			name string
			part wire.HomePartition
		}
		prs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.name, &x.part.Partition, &x.part.Replicas, &x.part.Leader, &x.part.LeaderEpoch)
		})
		if err != nil {
			return err
		}
		for _, x := range prs {
			if n := len(home.Topics); n == 0 || home.Topics[n-1].Name != x.name {
				home.Topics = append(home.Topics, wire.HomeTopic{Name: x.name, Describable: describable(acl, keyID, x.name)})
			}
			if t := &home.Topics[len(home.Topics)-1]; t.Describable {
				t.Partitions = append(t.Partitions, x.part)
			}
		}
		return nil
	})
	if err != nil {
		return invalid, err
	}
	return home, nil
}

// keyACL builds the tenant's data-plane ACL as the key's brokers evaluate
// it: the key's role defaults and the tenant's rules.
func (s *Server) keyACL(ctx context.Context, q rowsQuerier, tenant, keyID, role string) (*authz.ACL, error) {
	rows, _ := q.Query(ctx, `SELECT principal, resource_type, resource_name, pattern_type, operation, permission
		FROM acls WHERE tenant_id = $1 ORDER BY id`, tenant)
	rules, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (authz.Rule, error) {
		var a authz.Rule
		return a, r.Scan(&a.Principal, &a.ResourceType, &a.ResourceName, &a.PatternType, &a.Operation, &a.Permission)
	})
	if err != nil {
		return nil, err
	}
	return authz.NewACL([]authz.Key{{ID: keyID, Role: role}}, rules)
}

// describable is the brokers' rule: a key may learn that a topic exists if
// it may describe it (which any allowed operation but delete implies, and a
// deny on describe refuses).
func describable(acl *authz.ACL, keyID, topic string) bool {
	return acl.Allowed(keyID, authz.ResourceTopic, topic, authz.OpDescribe)
}
