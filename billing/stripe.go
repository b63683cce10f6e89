package billing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// DefaultCloseAfter is StripeConfig.CloseAfter's default.
const DefaultCloseAfter = 10 * time.Minute

// workerLock is the advisory lock key of the Stripe worker: one worker
// of all the control planes sends at a time.
const workerLock = 0x5175_1ce_b111

// StripeConfig configures a Reporter.
type StripeConfig struct {
	// DB is the control plane's database. Required.
	DB *pgxpool.Pool
	// Key is the Stripe secret key. Required: without one there is no
	// Reporter, and billing keeps the ledger only.
	Key string
	// URL overrides Stripe's API address (stripe-mock in tests).
	URL string
	// HTTPClient, if set, carries the requests (default a 30 s client).
	HTTPClient *http.Client
	// CloseAfter is how long after an hour ends its usage is taken as
	// final and enqueued; default 10 minutes (brokers ship within
	// seconds; late usage is what reconcile reports).
	CloseAfter time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Reporter reports the ledger to Stripe: it enqueues one meter event per
// (tenant, meter, closed hour) in billing_outbox and sends the pending ones
// with retries and backoff.
type Reporter struct {
	cfg StripeConfig
	api *client.API
}

// NewReporter checks cfg and returns a Reporter.
func NewReporter(cfg StripeConfig) (*Reporter, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("stripe config: DB is required")
	case cfg.Key == "":
		return nil, errors.New("stripe config: Key is required (without one, billing keeps the ledger only)")
	}
	if cfg.CloseAfter <= 0 {
		cfg.CloseAfter = DefaultCloseAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	bc := &stripe.BackendConfig{HTTPClient: cfg.HTTPClient, MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}}
	if cfg.URL != "" {
		bc.URL = stripe.String(cfg.URL)
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, bc)
	return &Reporter{cfg: cfg, api: client.New(cfg.Key, &stripe.Backends{API: b, Connect: b, Uploads: b})}, nil
}

// EventName is the Stripe meter event name of a Sluice meter.
func EventName(meter string) string { return "sluice_" + meter }

// Identifier is the meter event identifier of a tenant's meter in an hour:
// the same on every retry and restart.
func Identifier(tenant, meter string, hour time.Time) string {
	return "sluice-" + tenant + "-" + meter + "-" + strconv.FormatInt(hour.Unix(), 10)
}

// RunOnce does one round, if no other worker holds the lock: it creates
// the Stripe customers signups asked for (customers.go) and missing
// meters, enqueues the hours closed since the last round, and sends what
// is due. It returns how many events it sent.
func (r *Reporter) RunOnce(ctx context.Context) (sent int, err error) {
	_, sent, err = r.Round(ctx)
	return sent, err
}

// Round is RunOnce that also reports whether this worker held the lock
// and worked (false: another worker holds it, and this one did nothing).
func (r *Reporter) Round(ctx context.Context) (worked bool, sent int, err error) {
	conn, err := r.cfg.DB.Acquire(ctx)
	if err != nil {
		return false, 0, fmt.Errorf("billing worker: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, workerLock).Scan(&locked); err != nil {
		return false, 0, fmt.Errorf("billing worker lock: %w", err)
	}
	if !locked {
		return false, 0, nil // another worker works
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, workerLock) }()
	if _, err := r.createCustomers(ctx); err != nil {
		return true, 0, err
	}
	if err := r.ensureMeters(ctx); err != nil {
		return true, 0, err
	}
	if err := r.enqueue(ctx); err != nil {
		return true, 0, err
	}
	sent, err = r.send(ctx)
	return true, sent, err
}

func (r *Reporter) ensureMeters(ctx context.Context) error {
	for _, m := range Meters {
		var exists bool
		if err := r.cfg.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM billing_meters WHERE meter = $1)`, m).Scan(&exists); err != nil {
			return fmt.Errorf("read billing meters: %w", err)
		}
		if exists {
			continue
		}
		p := &stripe.BillingMeterParams{DisplayName: stripe.String("Sluice " + m), EventName: stripe.String(EventName(m)),
			DefaultAggregation: &stripe.BillingMeterDefaultAggregationParams{Formula: stripe.String("sum")},
			CustomerMapping:    &stripe.BillingMeterCustomerMappingParams{Type: stripe.String("by_id"), EventPayloadKey: stripe.String("stripe_customer_id")},
			ValueSettings:      &stripe.BillingMeterValueSettingsParams{EventPayloadKey: stripe.String("value")}}
		p.SetIdempotencyKey("sluice-meter-" + m)
		sm, err := r.api.BillingMeters.New(p)
		if err != nil {
			return fmt.Errorf("create stripe meter %s: %w", m, err)
		}
		if _, err := r.cfg.DB.Exec(ctx, `INSERT INTO billing_meters (meter, event_name, stripe_meter_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			m, EventName(m), sm.ID); err != nil {
			return fmt.Errorf("record stripe meter %s: %w", m, err)
		}
	}
	return nil
}

// enqueue adds an outbox row for every (tenant, meter, hour) of the
// ledger that closed at least CloseAfter ago, within Stripe's window for
// meter events, and has none yet.
func (r *Reporter) enqueue(ctx context.Context) error {
	now := r.cfg.Now().UTC()
	// The last hour that ended at least CloseAfter ago.
	closed := now.Add(-r.cfg.CloseAfter - time.Hour).Truncate(time.Hour)
	_, err := r.cfg.DB.Exec(ctx, `INSERT INTO billing_outbox (tenant_id, meter, hour, value, identifier, next_attempt_at)
		SELECT tenant_id, meter, hour, sum(value), 'sluice-' || tenant_id || '-' || meter || '-' || extract(epoch FROM hour)::bigint, $3
		FROM usage_ledger WHERE hour <= $1 AND hour > $2
		GROUP BY tenant_id, meter, hour
		ON CONFLICT DO NOTHING`, closed, now.Add(-30*24*time.Hour), now)
	if err != nil {
		return fmt.Errorf("enqueue meter events: %w", err)
	}
	return nil
}

// backoff is the wait after attempt n failed: 1 s doubling to an hour.
func backoff(n int) time.Duration {
	return min(time.Second<<min(n, 12), time.Hour)
}

// send sends the due outbox rows, oldest first, and records each outcome.
// An event is marked sent only after Stripe answered; a worker killed in
// between sends it again with the same identifier and idempotency key.
func (r *Reporter) send(ctx context.Context) (int, error) {
	rows, err := r.cfg.DB.Query(ctx, `SELECT tenant_id, meter, hour, value, identifier, attempts FROM billing_outbox
		WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY hour, tenant_id, meter LIMIT 500`, r.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	type due struct {
		tenant, meter, id string
		hour              time.Time
		value             int64
		attempts          int
	}
	var todo []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.tenant, &d.meter, &d.hour, &d.value, &d.id, &d.attempts); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read outbox: %w", err)
		}
		todo = append(todo, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	sent := 0
	for _, d := range todo {
		cust, err := r.customer(ctx, d.tenant)
		if err == nil {
			p := &stripe.BillingMeterEventParams{EventName: stripe.String(EventName(d.meter)), Identifier: stripe.String(d.id),
				Timestamp: stripe.Int64(d.hour.Unix()),
				Payload:   map[string]string{"stripe_customer_id": cust, "value": strconv.FormatInt(d.value, 10)}}
			// The identifier is also the idempotency key: a retry after a
			// worker died before recording the answer gets Stripe's first
			// answer back instead of a duplicate-identifier error, which
			// would keep the event pending for ever.
			p.SetIdempotencyKey(d.id)
			_, err = r.api.BillingMeterEvents.New(p)
		}
		if err != nil {
			r.cfg.Logger.Warn("send meter event; will retry", "identifier", d.id, "attempts", d.attempts+1, "err", err)
			if _, uerr := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3
				WHERE identifier = $1`, d.id, r.cfg.Now().Add(backoff(d.attempts)), err.Error()); uerr != nil {
				return sent, fmt.Errorf("record meter event failure: %w", uerr)
			}
			continue
		}
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET state = 'sent', sent_at = now(), attempts = attempts + 1, last_error = ''
			WHERE identifier = $1`, d.id); err != nil {
			return sent, fmt.Errorf("record meter event sent: %w", err)
		}
		sent++
	}
	return sent, nil
}
