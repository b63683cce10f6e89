package billing

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/usagewire"
)

// Range is a partition's closed produce range in a Record (version 2),
// as brokers write it (usagewire.Range).
type Range = usagewire.Range

type rangeKey struct {
	topic     string
	partition int32
	hour      int64
}

// newRanges applies ranges (usage_ranges, migration 00017): per (topic,
// partition, hour) the range with the highest end offset wins; one above
// the end the ledger holds adds its sums' growth over the range held, to
// sums. Ranges below or at it add nothing: that hour up to that offset is
// counted already, whichever usage partition brought it first. Rows are
// locked in key order, so concurrent shipments of several usage
// partitions serialize without deadlock.
func newRanges(ctx context.Context, tx pgx.Tx, ranges []Range, sums map[ledgerKey]int64) error {
	if len(ranges) == 0 {
		return nil
	}
	best := map[rangeKey]Range{}
	for _, r := range ranges {
		k := rangeKey{r.Topic, r.Partition, r.Hour}
		if b, ok := best[k]; !ok || r.End > b.End {
			best[k] = r
		}
	}
	keys := make([]rangeKey, 0, len(best))
	for k := range best {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b rangeKey) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.hour, b.hour))
	})
	topics, parts, hours := make([]string, len(keys)), make([]int32, len(keys)), make([]time.Time, len(keys))
	for i, k := range keys {
		topics[i], parts[i], hours[i] = k.topic, k.partition, time.Unix(k.hour, 0).UTC()
	}
	if _, err := tx.Exec(ctx, `INSERT INTO usage_ranges (topic_id, partition, hour, end_offset, bytes, messages)
		SELECT t, p, h, -1, 0, 0 FROM unnest($1::text[], $2::integer[], $3::timestamptz[]) AS u(t, p, h)
		ORDER BY t, p, h ON CONFLICT DO NOTHING`, topics, parts, hours); err != nil {
		return fmt.Errorf("create usage ranges: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT topic_id, partition, hour, end_offset, bytes, messages FROM usage_ranges
		WHERE (topic_id, partition, hour) IN (SELECT * FROM unnest($1::text[], $2::integer[], $3::timestamptz[]))
		ORDER BY topic_id, partition, hour FOR UPDATE`, topics, parts, hours)
	if err != nil {
		return fmt.Errorf("read usage ranges: %w", err)
	}
	held := map[rangeKey]Range{}
	for rows.Next() {
		var k rangeKey
		var h time.Time
		var r Range
		if err := rows.Scan(&k.topic, &k.partition, &h, &r.End, &r.Bytes, &r.Messages); err != nil {
			rows.Close()
			return fmt.Errorf("read usage ranges: %w", err)
		}
		k.hour = h.Unix()
		held[k] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read usage ranges: %w", err)
	}
	var upTopics []string
	var upParts []int32
	var upHours []time.Time
	var upEnds, upBytes, upMsgs []int64
	for i, k := range keys {
		r, h := best[k], held[k]
		if r.End <= h.End {
			continue
		}
		// Cumulative over the hour, so never below what is held; a
		// range that is would be a broker's bug, and counts nothing.
		sums[ledgerKey{r.Tenant, r.Topic, "bytes_in", r.Hour}] += max(r.Bytes-h.Bytes, 0)
		sums[ledgerKey{r.Tenant, r.Topic, "messages_in", r.Hour}] += max(r.Messages-h.Messages, 0)
		upTopics, upParts, upHours = append(upTopics, k.topic), append(upParts, k.partition), append(upHours, hours[i])
		upEnds, upBytes, upMsgs = append(upEnds, r.End), append(upBytes, max(r.Bytes, h.Bytes)), append(upMsgs, max(r.Messages, h.Messages))
	}
	if len(upTopics) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE usage_ranges r SET end_offset = u.e, bytes = u.b, messages = u.m, applied_at = now()
		FROM unnest($1::text[], $2::integer[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u(t, p, h, e, b, m)
		WHERE r.topic_id = u.t AND r.partition = u.p AND r.hour = u.h`,
		upTopics, upParts, upHours, upEnds, upBytes, upMsgs); err != nil {
		return fmt.Errorf("move usage ranges: %w", err)
	}
	return nil
}

// pruneRanges forgets the ranges of hours before cutoff that a later hour
// of the same partition supersedes. A partition's latest range is kept
// however old: its next leader records it again, and it must count once.
func pruneRanges(ctx context.Context, db *pgxpool.Pool, cutoff time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM usage_ranges r WHERE r.hour < $1 AND EXISTS (
		SELECT 1 FROM usage_ranges n WHERE n.topic_id = r.topic_id AND n.partition = r.partition AND n.hour > r.hour)`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("prune usage_ranges: %w", err)
	}
	return tag.RowsAffected(), nil
}
