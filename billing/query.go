package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Query selects ledger rows.
type Query struct {
	// Tenant limits the rows to one tenant; "" is every tenant (the
	// operators' view).
	Tenant string
	// From and To bound the periods, [From, To), both aligned to the
	// granularity.
	From, To time.Time
	// Day sums hours into UTC days.
	Day bool
	// Meters limits the meters; empty is all.
	Meters []string
	// ByTopic keeps topics apart; otherwise a tenant's topics are summed.
	ByTopic bool
}

// Row is one period of one meter.
type Row struct {
	Tenant string
	// TopicID and Topic (its name; "" once deleted) are set with
	// ByTopic; TopicID "" is usage of no single topic.
	TopicID, Topic string
	Meter          string
	Start          time.Time
	Value          int64
}

// Usage returns the ledger's rows for q, ordered by tenant, meter,
// period and topic.
func (l *Ledger) Usage(ctx context.Context, q Query) ([]Row, error) {
	unit := "hour"
	if q.Day {
		unit = "day"
	}
	meters := q.Meters
	if len(meters) == 0 {
		meters = Meters
	}
	topic := "''"
	if q.ByTopic {
		topic = "u.topic_id"
	}
	sql := fmt.Sprintf(`SELECT u.tenant_id, %[1]s, COALESCE(max(t.name), ''), u.meter, date_trunc('%[2]s', u.hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', sum(u.value)::bigint
		FROM usage_ledger u LEFT JOIN topics t ON t.id = u.topic_id AND t.tenant_id = u.tenant_id AND %[3]s
		WHERE ($1 = '' OR u.tenant_id = $1) AND u.hour >= $2 AND u.hour < $3 AND u.meter = ANY($4)
		GROUP BY 1, 2, 4, 5 ORDER BY 1, 4, 5, 2`, topic, unit, fmt.Sprint(q.ByTopic))
	rows, err := l.DB.Query(ctx, sql, q.Tenant, q.From.UTC(), q.To.UTC(), meters)
	if err != nil {
		return nil, fmt.Errorf("query usage: %w", err)
	}
	// A query that matches nothing answers nil, not an empty slice.
	out, err := pgx.AppendRows([]Row(nil), rows, func(row pgx.CollectableRow) (r Row, err error) {
		err = row.Scan(&r.Tenant, &r.TopicID, &r.Topic, &r.Meter, &r.Start, &r.Value)
		r.Start = r.Start.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read usage: %w", err)
	}
	return out, nil
}

// Totals sums each tenant's meters over [from, to): the figures a test
// or a reconciliation compares.
func (l *Ledger) Totals(ctx context.Context, tenant string, from, to time.Time) (map[string]int64, error) {
	rows, err := l.Usage(ctx, Query{Tenant: tenant, From: from, To: to, Day: true})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Meter] += r.Value
	}
	return out, nil
}
