package controlplane

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// Consumer groups as their coordinators report them: committed offsets and
// lag per partition, in group_lag. A coordinator reports every partition of
// the topics a group consumes; one without a commit comes with committed
// offset -1 (Kafka's "no offset"), stored as is and served as null. A tenant moving between cells may briefly
// be reported by both; the newest report of each partition wins.

// latestGroupLag is the caller's group_lag rows, the newest per (group,
// topic, partition); $1 is the tenant id.
const latestGroupLag = `SELECT DISTINCT ON (group_name, topic_id, partition) * FROM group_lag
	WHERE tenant_id = $1 ORDER BY group_name, topic_id, partition, reported_at DESC`

const groupTotals = `count(*)::int, sum(lag_records)::bigint, sum(lag_bytes)::bigint, max(lag_seconds),
	max(retention_fraction), bool_or(expired), min(reported_at)`

func scanGroup(r pgx.Row) (api.Group, error) {
	var g api.Group
	err := r.Scan(&g.Group, &g.PartitionCount, &g.LagRecords, &g.LagBytes, &g.MaxLagSeconds,
		&g.MaxRetentionFraction, &g.Expired, &g.ReportedAt)
	return g, err
}

func (s *Server) listGroups(c echo.Context) error {
	p, pg, err := s.tenantPage(c, authz.ObjGroups)
	if err != nil {
		return err
	}
	return listPage(c, s, "list groups", pg, scanGroup,
		func(g api.Group) string { return g.Group },
		`WITH l AS (`+latestGroupLag+`) SELECT group_name, `+groupTotals+` FROM l WHERE group_name > $2
		GROUP BY group_name ORDER BY group_name LIMIT $3`, p.tenantID, pg.after, pg.limit+1)
}

// getGroup answers with the group's lag per partition, or group_not_found:
// another tenant's group looks exactly like a missing one.
func (s *Server) getGroup(c echo.Context) error {
	p, err := s.tenantCaller(c, authz.ObjGroups, authz.ActRead)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := c.Param("group")
	rows, err := s.db.Query(ctx, `WITH l AS (`+latestGroupLag+`)
		SELECT t.name, l.partition, l.committed_offset, l.committed_at, l.measured, l.high_watermark, l.log_start_offset,
			l.lag_records, l.lag_bytes, l.lag_seconds, l.retention_fraction, l.expired, l.reported_at
		FROM l JOIN topics t ON t.id = l.topic_id WHERE l.group_name = $2 ORDER BY t.name, l.partition`, p.tenantID, name)
	if err != nil {
		return dbError("load group", err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.GroupPartition, error) {
		var gp api.GroupPartition
		var committed int64
		err := r.Scan(&gp.Topic, &gp.Partition, &committed, &gp.CommittedAt, &gp.Measured, &gp.HighWatermark,
			&gp.LogStartOffset, &gp.LagRecords, &gp.LagBytes, &gp.LagSeconds, &gp.RetentionFraction, &gp.Expired, &gp.ReportedAt)
		if committed >= 0 {
			gp.CommittedOffset = &committed
		}
		return gp, err
	})
	if err != nil {
		return dbError("load group", err)
	}
	if len(parts) == 0 {
		return catalog.GroupNotFound.Newf("no group named %q", name)
	}
	g := api.Group{Group: name, PartitionCount: len(parts), ReportedAt: parts[0].ReportedAt, Partitions: parts}
	for _, gp := range parts {
		g.LagRecords += gp.LagRecords
		g.LagBytes += gp.LagBytes
		g.MaxLagSeconds = max(g.MaxLagSeconds, gp.LagSeconds)
		g.MaxRetentionFraction = max(g.MaxRetentionFraction, gp.RetentionFraction)
		g.Expired = g.Expired || gp.Expired
		if gp.ReportedAt.Before(g.ReportedAt) {
			g.ReportedAt = gp.ReportedAt
		}
	}
	return c.JSON(http.StatusOK, g)
}

// maxGroupNameBytes bounds the group names stored from reports.
const maxGroupNameBytes = 1024

// storeGroupLag replaces what broker last reported of its groups' lag in
// cell with rows. Rows for topics that are not the tenant's on this cell
// are skipped, so a cell key writes only its own tenants' lag (and, from
// the switch of a tenant's move away until it is done, that tenant's:
// its final offsets, which the move hands to the destination); so are rows
// whose group name Postgres cannot store (NUL, not UTF-8) or that is empty
// or longer than 1 KiB. The broker's rows missing from this report go.
func storeGroupLag(ctx context.Context, tx pgx.Tx, cell, broker string, rows []wire.GroupLag) (skipped int, err error) {
	type key struct {
		tenant, group, topic string
		part                 int
	}
	idx := map[key]int{}
	var keep []wire.GroupLag
	for _, r := range rows {
		if r.Group == "" || len(r.Group) > maxGroupNameBytes || strings.ContainsRune(r.Group, 0) || !utf8.ValidString(r.Group) || r.Partition < 0 {
			skipped++
			continue
		}
		k := key{r.TenantID, r.Group, r.TopicID, r.Partition}
		if i, dup := idx[k]; dup {
			keep[i] = r // one row per key: the last wins
			continue
		}
		idx[k] = len(keep)
		keep = append(keep, r)
	}
	n := len(keep)
	var (
		tenants, groups, topics = make([]string, n), make([]string, n), make([]string, n)
		parts                   = make([]int32, n)
		committed, hw, start    = make([]int64, n), make([]int64, n), make([]int64, n)
		records, bytes          = make([]int64, n), make([]int64, n)
		seconds, fraction       = make([]float64, n), make([]float64, n)
		committedAt             = make([]*time.Time, n)
		measured, expired       = make([]bool, n), make([]bool, n)
	)
	for i, r := range keep {
		tenants[i], groups[i], topics[i], parts[i] = r.TenantID, r.Group, r.TopicID, int32(r.Partition)
		committed[i], hw[i], start[i], records[i], bytes[i] = r.CommittedOffset, r.HighWatermark, r.LogStartOffset, r.LagRecords, r.LagBytes
		seconds[i], fraction[i], measured[i], expired[i] = r.LagSeconds, r.RetentionFraction, r.Measured, r.Expired
		if !r.CommittedAt.IsZero() {
			at := r.CommittedAt
			committedAt[i] = &at
		}
	}
	if n > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO group_lag (cell_id, broker_id, tenant_id, group_name, topic_id, partition,
				committed_offset, committed_at, measured, high_watermark, log_start_offset, lag_records, lag_bytes,
				lag_seconds, retention_fraction, expired, reported_at)
			SELECT $1, $2, r.*, now() FROM unnest($3::text[], $4::text[], $5::text[], $6::int[], $7::bigint[],
				$8::timestamptz[], $9::bool[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::float8[],
				$15::float8[], $16::bool[])
				AS r(tenant_id, group_name, topic_id, partition, committed_offset, committed_at, measured, high_watermark,
				log_start_offset, lag_records, lag_bytes, lag_seconds, retention_fraction, expired)
			WHERE EXISTS (SELECT 1 FROM partitions p JOIN topics t ON t.id = p.topic_id
				WHERE p.topic_id = r.topic_id AND p.partition = r.partition AND t.tenant_id = r.tenant_id
				AND (p.cell_id = $1 OR EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = t.tenant_id
					AND m.source_cell_id = $1 AND m.state IN ('switching', 'offsets'))))
			ON CONFLICT (cell_id, tenant_id, group_name, topic_id, partition) DO UPDATE SET broker_id = EXCLUDED.broker_id,
				committed_offset = EXCLUDED.committed_offset, committed_at = EXCLUDED.committed_at, measured = EXCLUDED.measured,
				high_watermark = EXCLUDED.high_watermark, log_start_offset = EXCLUDED.log_start_offset,
				lag_records = EXCLUDED.lag_records, lag_bytes = EXCLUDED.lag_bytes, lag_seconds = EXCLUDED.lag_seconds,
				retention_fraction = EXCLUDED.retention_fraction, expired = EXCLUDED.expired, reported_at = EXCLUDED.reported_at`,
			cell, broker, tenants, groups, topics, parts, committed, committedAt, measured, hw, start, records, bytes,
			seconds, fraction, expired); err != nil {
			return skipped, err
		}
	}
	// now() is the transaction's start: every row this report wrote has it.
	_, err = tx.Exec(ctx, `DELETE FROM group_lag WHERE cell_id = $1 AND broker_id = $2 AND reported_at < now()`, cell, broker)
	return skipped, err
}
