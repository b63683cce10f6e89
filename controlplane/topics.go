package controlplane

import (
	"context"
	"errors"
	"maps"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/topicspec"
)

const topicColumns = `id, name, partitions, replication_factor, config, created_at, updated_at`

type topicRow struct {
	id string
	api.Topic
}

func scanTopic(row pgx.Row) (topicRow, error) {
	var t topicRow
	err := row.Scan(&t.id, &t.Name, &t.Partitions, &t.ReplicationFactor, &t.Config, &t.CreatedAt, &t.UpdatedAt)
	if t.Config == nil {
		t.Config = map[string]string{}
	}
	return t, err
}

func (s *Server) listTopics(c echo.Context) error {
	p, pg, err := s.tenantPage(c, authz.ObjTopics)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q, err := loadQuotas(ctx, s.db, p.tenantID)
	if err != nil {
		return dbError("load quotas", err)
	}
	acl, err := s.callerACL(ctx, p)
	if err != nil {
		return err
	}
	// An API key sees the topics its ACLs let it describe, so its page is
	// filtered before it is cut: read them all (the tenant's topic quota
	// bounds them). LIMIT NULL is no limit.
	var limit any = pg.limit + 1
	if acl != nil {
		limit = nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+topicColumns+` FROM topics WHERE tenant_id = $1 AND name > $2
		ORDER BY name LIMIT $3`, p.tenantID, pg.after, limit)
	if err != nil {
		return dbError("list topics", err)
	}
	trs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (topicRow, error) { return scanTopic(r) })
	if err != nil {
		return dbError("list topics", err)
	}
	topics := make([]api.Topic, 0, len(trs))
	for _, t := range trs {
		if len(topics) > pg.limit {
			break
		}
		if !topicDescribable(acl, p, t.Name) {
			continue
		}
		t.EffectiveConfig = topicspec.Effective(t.Config, q)
		redactConfig(acl, p, &t.Topic)
		topics = append(topics, t.Topic)
	}
	items, next := trim(pg, topics, func(t api.Topic) string { return t.Name })
	return c.JSON(http.StatusOK, api.Page[api.Topic]{Items: items, NextPageToken: next})
}

// loadTopic returns the tenant's topic with its assignments, or
// topic_not_found: another tenant's topic looks exactly like a missing one.
func (s *Server) loadTopic(ctx context.Context, q querier, tenantID, name string) (api.Topic, error) {
	t, err := scanTopic(q.QueryRow(ctx, `SELECT `+topicColumns+` FROM topics WHERE tenant_id = $1 AND name = $2`, tenantID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Topic{}, catalog.TopicNotFound.Newf("no topic named %q", name)
	}
	if err != nil {
		return api.Topic{}, dbError("load topic", err)
	}
	quotas, err := loadQuotas(ctx, q, tenantID)
	if err != nil {
		return api.Topic{}, dbError("load quotas", err)
	}
	t.EffectiveConfig = topicspec.Effective(t.Config, quotas)
	// The leader is the node reported with the newest epoch (a broker that
	// stopped reporting leaves an older one behind); offsets and size are
	// the leader's own report of its replica when it sent one.
	rows, err := s.db.Query(ctx, `SELECT p.partition, p.replicas, s.leader_node, s.leader_epoch,
			s.log_start_offset, s.high_watermark, s.size_bytes, s.reported_at
		FROM partitions p
		LEFT JOIN LATERAL (SELECT ps.leader_node, ps.leader_epoch, ps.log_start_offset, ps.high_watermark,
				ps.size_bytes, ps.reported_at
			FROM partition_status ps JOIN brokers b ON b.id = ps.broker_id
			WHERE ps.topic_id = p.topic_id AND ps.partition = p.partition AND ps.leader_node > 0
			ORDER BY ps.leader_epoch DESC, (b.node_id = ps.leader_node) DESC, ps.reported_at DESC LIMIT 1) s ON true
		WHERE p.topic_id = $1 ORDER BY p.partition`, t.id)
	if err != nil {
		return api.Topic{}, dbError("load partitions", err)
	}
	t.Assignments, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Partition, error) {
		var p api.Partition
		return p, r.Scan(&p.Partition, &p.Replicas, &p.Leader, &p.LeaderEpoch, &p.LogStartOffset, &p.HighWatermark, &p.SizeBytes, &p.ReportedAt)
	})
	if err != nil {
		return api.Topic{}, dbError("load partitions", err)
	}
	return t.Topic, nil
}

func (s *Server) getTopic(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjTopics, authz.ActRead)
	if err != nil {
		return err
	}
	ctx, name := c.Request().Context(), c.Param("name")
	acl, err := s.callerACL(ctx, p)
	if err != nil {
		return err
	}
	if !topicDescribable(acl, p, name) {
		return catalog.TopicAccessDenied.Newf("the ACLs of API key %s do not allow describe on topic %q", p.keyID, name)
	}
	t, err := s.loadTopic(ctx, s.db, p.tenantID, name)
	if err != nil {
		return err
	}
	redactConfig(acl, p, &t)
	return c.JSON(http.StatusOK, t)
}

// redactConfig empties a topic's config for an API key that may describe
// the topic but not its configs (describe_configs).
func redactConfig(acl *authz.ACL, p *principal, t *api.Topic) {
	if !aclAllows(acl, p, authz.ResourceTopic, t.Name, authz.OpDescribeConfigs) {
		t.Config, t.EffectiveConfig = map[string]string{}, map[string]string{}
	}
}

// errValidated ends a validate-only transaction after every check passed.
var errValidated = errors.New("validated only")

// createTopicBody reads Partitions as a pointer so that an explicit 0 is
// refused rather than taken for "omitted" (the default of 1).
type createTopicBody struct {
	api.CreateTopicRequest
	Partitions *int `json:"partitions"`
}

func (s *Server) createTopic(c echo.Context) error {
	p, body, err := tenantWrite[createTopicBody](s, c, authz.ObjTopics)
	if err != nil {
		return err
	}
	req := body.CreateTopicRequest
	if err := topicspec.ValidName(req.Name); err != nil {
		return err
	}
	switch {
	case body.Partitions == nil:
		req.Partitions = 1
	case *body.Partitions < 1:
		return catalog.InvalidPartitions.Newf("partitions must be at least 1 (%d given); leave it out for 1", *body.Partitions)
	default:
		req.Partitions = *body.Partitions
	}
	if req.Config == nil {
		req.Config = map[string]string{}
	}
	ctx := c.Request().Context()
	if _, err := s.requireTopicOps(ctx, p, req.Name, authz.OpCreate); err != nil {
		return err
	}
	id := credential.NewID("tp_")
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cell, q, err := lockTenant(ctx, tx, p.tenantID)
		if err != nil {
			return err
		}
		if err := topicspec.ValidateConfig(req.Config, &q); err != nil {
			return err
		}
		if err := checkTopicLimits(ctx, tx, p.tenantID, q, 1, req.Partitions); err != nil {
			return err
		}
		if err := insertNew(ctx, tx, catalog.TopicAlreadyExists.Newf("a topic named %q already exists", req.Name),
			`INSERT INTO topics (id, tenant_id, name, partitions, replication_factor, config)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, p.tenantID, req.Name, req.Partitions, replicationFactor, req.Config); err != nil {
			return err
		}
		rf, err := placePartitions(ctx, tx, cell, id, 0, req.Partitions)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE topics SET replication_factor = $2 WHERE id = $1`, id, rf); err != nil {
			return err
		}
		if req.ValidateOnly {
			return errValidated
		}
		if err := bumpCell(ctx, tx, cell); err != nil {
			return err
		}
		return audit(ctx, tx, p, "topic.create", req.Name, map[string]any{"partitions": req.Partitions, "config": req.Config})
	})
	if errors.Is(err, errValidated) {
		return c.NoContent(http.StatusNoContent)
	}
	if err := txError("create topic", err); err != nil {
		return err
	}
	t, err := s.loadTopic(ctx, s.db, p.tenantID, req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

// lockTenant serializes a tenant's topic changes and returns its home cell
// and quotas; it refuses them while the tenant moves to another cell.
func lockTenant(ctx context.Context, tx pgx.Tx, tenantID string) (string, api.Quotas, error) {
	var cell string
	if err := tx.QueryRow(ctx, `SELECT home_cell_id FROM tenants WHERE id = $1 FOR UPDATE`, tenantID).Scan(&cell); err != nil {
		return "", api.Quotas{}, err
	}
	if err := refuseWhileMoving(ctx, tx, tenantID); err != nil {
		return "", api.Quotas{}, err
	}
	q, err := loadQuotas(ctx, tx, tenantID)
	return cell, q, err
}

// checkTopicLimits checks that adding topics and partitions stays within the
// tenant's quotas.
func checkTopicLimits(ctx context.Context, tx pgx.Tx, tenantID string, q api.Quotas, addTopics, addPartitions int) error {
	if err := topicspec.ValidPartitions(addPartitions, &q); err != nil {
		return err
	}
	var topics, partitions int
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(partitions), 0) FROM topics WHERE tenant_id = $1`, tenantID).
		Scan(&topics, &partitions); err != nil {
		return err
	}
	if topics+addTopics > q.MaxTopics {
		return catalog.QuotaExceeded.Newf("the tenant may have %d topics and has %d", q.MaxTopics, topics)
	}
	if partitions+addPartitions > q.MaxPartitions {
		return catalog.QuotaExceeded.Newf("the tenant may have %d partitions in all and has %d", q.MaxPartitions, partitions)
	}
	return nil
}

func (s *Server) updateTopic(c echo.Context) error {
	p, req, err := tenantWrite[api.UpdateTopicRequest](s, c, authz.ObjTopics)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := c.Param("name")
	// Growing partitions is Kafka's alter (CreatePartitions); changing
	// config is alter_configs.
	var ops []string
	if req.Partitions != nil {
		ops = append(ops, authz.OpAlter)
	}
	if len(req.Config) > 0 {
		ops = append(ops, authz.OpAlterConfigs)
	}
	if len(ops) == 0 {
		ops = append(ops, authz.OpDescribe) // a change of nothing answers the topic
	}
	acl, err := s.requireTopicOps(ctx, p, name, ops...)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cell, q, err := lockTenant(ctx, tx, p.tenantID)
		if err != nil {
			return err
		}
		t, err := scanTopic(tx.QueryRow(ctx, `SELECT `+topicColumns+` FROM topics WHERE tenant_id = $1 AND name = $2`, p.tenantID, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.TopicNotFound.Newf("no topic named %q", name)
		}
		if err != nil {
			return err
		}
		cfg := maps.Clone(t.Config)
		for k, v := range req.Config {
			if v == nil {
				delete(cfg, k)
			} else {
				cfg[k] = *v
			}
		}
		if err := topicspec.ValidateConfig(cfg, &q); err != nil {
			return err
		}
		partitions := t.Partitions
		if req.Partitions != nil {
			switch n := *req.Partitions; {
			case n < t.Partitions:
				return catalog.PartitionsShrink.Newf("topic %q has %d partitions; the count can only grow", name, t.Partitions)
			case n > t.Partitions:
				if err := checkTopicLimits(ctx, tx, p.tenantID, q, 0, n-t.Partitions); err != nil {
					return err
				}
				if _, err := placePartitions(ctx, tx, cell, t.id, t.Partitions, n); err != nil {
					return err
				}
				partitions = n
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE topics SET partitions = $2, config = $3, updated_at = now() WHERE id = $1`,
			t.id, partitions, cfg); err != nil {
			return err
		}
		if req.ValidateOnly {
			return errValidated
		}
		if err := bumpCell(ctx, tx, cell); err != nil {
			return err
		}
		return audit(ctx, tx, p, "topic.update", name, map[string]any{"partitions": partitions, "config": cfg})
	})
	if errors.Is(err, errValidated) {
		return c.NoContent(http.StatusNoContent)
	}
	if err := txError("update topic", err); err != nil {
		return err
	}
	t, err := s.loadTopic(ctx, s.db, p.tenantID, name)
	if err != nil {
		return err
	}
	redactConfig(acl, p, &t)
	return c.JSON(http.StatusOK, t)
}

func (s *Server) deleteTopic(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjTopics, authz.ActWrite)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := c.Param("name")
	if _, err := s.requireTopicOps(ctx, p, name, authz.OpDelete); err != nil {
		return err
	}
	return s.deleteTenantRow(c, p, "topic", name, `DELETE FROM topics WHERE tenant_id = $1 AND name = $2`,
		catalog.TopicNotFound.Newf("no topic named %q", name))
}

// deleteTenantRow deletes the caller's tenant's what named id with del
// (its arguments the tenant and id) and answers 204, or notFound when del
// matched no row; in the same transaction it bumps the tenant's cell and
// audits the deletion, as deleting an ACL or a topic must.
func (s *Server) deleteTenantRow(c echo.Context, p *principal, what, id, del string, notFound error) error {
	ctx := c.Request().Context()
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, del, p.tenantID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return notFound
		}
		return bumpAndAudit(ctx, tx, p.tenantID, p, what+".delete", id, nil)
	})
	if err := txError("delete "+what, err); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// txError passes catalogued errors through and maps the rest.
func txError(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *catalog.Error
	if errors.As(err, &ce) {
		return ce
	}
	return dbError(op, err)
}
