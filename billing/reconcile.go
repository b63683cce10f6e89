package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Difference is one (tenant, meter, hour) where what was sent to Stripe
// is not what the ledger holds.
type Difference struct {
	Tenant string    `json:"tenant_id"`
	Meter  string    `json:"meter"`
	Hour   time.Time `json:"hour"`
	// Ledger is the ledger's value now; Outbox the value enqueued (0 if
	// none was).
	Ledger int64 `json:"ledger"`
	Outbox int64 `json:"outbox"`
	// State is the outbox row's: "pending", "sent", "held" (first sent
	// longer than ResendWindow ago and not settled from Stripe's summary
	// of the hour: not resent, for an operator to settle), or "missing"
	// (a closed hour not enqueued).
	State string `json:"state"`
	// Reason is why a held event is held.
	Reason string `json:"reason,omitempty"`
}

// Reconcile compares the ledger with the outbox for the hours closed (at
// least closeAfter ago) since since: it lists every hour whose event was
// not sent yet, is held (Stripe may have it, and a resend past its
// identifier window could bill twice), was never enqueued, or was sent
// with a value the ledger no longer holds (usage shipped after the hour
// was closed).
func (l *Ledger) Reconcile(ctx context.Context, since, now time.Time, closeAfter time.Duration) ([]Difference, error) {
	closed := now.UTC().Add(-closeAfter - time.Hour).Truncate(time.Hour)
	rows, err := l.DB.Query(ctx, `WITH led AS (
			SELECT tenant_id, meter, hour, sum(value)::bigint AS value FROM usage_ledger
			WHERE hour >= $1 AND hour <= $2 GROUP BY tenant_id, meter, hour)
		SELECT COALESCE(led.tenant_id, o.tenant_id), COALESCE(led.meter, o.meter), COALESCE(led.hour, o.hour),
			COALESCE(led.value, 0), COALESCE(o.value, 0), COALESCE(o.state, 'missing'),
			CASE WHEN o.state = 'held' THEN o.last_error ELSE '' END
		FROM led FULL OUTER JOIN (SELECT * FROM billing_outbox WHERE hour >= $1 AND hour <= $2) o
			ON o.tenant_id = led.tenant_id AND o.meter = led.meter AND o.hour = led.hour
		WHERE o.state IS DISTINCT FROM 'sent' OR o.value <> COALESCE(led.value, 0)
		ORDER BY 3, 1, 2`, since.UTC(), closed)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	// No rows is an empty list, not nil: the JSON says [].
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (d Difference, err error) {
		err = row.Scan(&d.Tenant, &d.Meter, &d.Hour, &d.Ledger, &d.Outbox, &d.State, &d.Reason)
		d.Hour = d.Hour.UTC()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return out, nil
}
