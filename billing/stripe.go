package billing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// DefaultCloseAfter is StripeConfig.CloseAfter's default.
const DefaultCloseAfter = 10 * time.Minute

// IdentifierWindow is how long Stripe is known to keep a meter event's
// identifier, and an idempotency key, to recognise a resend: 24 hours.
// ResendWindow is that less an hour's margin for clocks and for requests
// in flight: an event first sent longer ago is not resent blindly
// (resendOrSettle).
const (
	IdentifierWindow = 24 * time.Hour
	ResendWindow     = IdentifierWindow - time.Hour
)

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

// due is a pending outbox row.
type due struct {
	tenant, meter, id string
	hour              time.Time
	value             int64
	attempts          int
	// first is when a request that may have reached Stripe first left
	// (nil: none has).
	first *time.Time
}

// send sends the due outbox rows, oldest first, and records each outcome.
// An event is marked sent only after Stripe answered; a worker killed in
// between sends it again with the same identifier and idempotency key,
// which Stripe recognises for IdentifierWindow. Before each request the
// row records when the first one left; a row first sent longer than
// ResendWindow ago is settled from Stripe's summary of its hour instead
// (resendOrSettle).
func (r *Reporter) send(ctx context.Context) (int, error) {
	rows, err := r.cfg.DB.Query(ctx, `SELECT tenant_id, meter, hour, value, identifier, attempts, first_attempt_at FROM billing_outbox
		WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY hour, tenant_id, meter LIMIT 500`, r.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	todo, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (d due, err error) {
		err = row.Scan(&d.tenant, &d.meter, &d.hour, &d.value, &d.id, &d.attempts, &d.first)
		return d, err
	})
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	sent := 0
	for _, d := range todo {
		cust, err := r.customer(ctx, d.tenant)
		if err == nil && d.first != nil && r.cfg.Now().Sub(*d.first) >= ResendWindow {
			var done bool
			if done, err = r.resendOrSettle(ctx, &d, cust); done {
				continue
			}
		}
		if err == nil {
			err = r.sendEvent(ctx, d, cust)
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

// sendEvent sends d's meter event. It first records, if none is, when the
// first request that may reach Stripe left; a request Stripe certainly
// did not take (refusedUnsent) that was the first undoes it.
func (r *Reporter) sendEvent(ctx context.Context, d due, cust string) error {
	if d.first == nil {
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET first_attempt_at = $2 WHERE identifier = $1 AND first_attempt_at IS NULL`,
			d.id, r.cfg.Now()); err != nil {
			return fmt.Errorf("record first attempt: %w", err)
		}
	}
	p := &stripe.BillingMeterEventParams{EventName: stripe.String(EventName(d.meter)), Identifier: stripe.String(d.id),
		Timestamp: stripe.Int64(d.hour.Unix()),
		Payload:   map[string]string{"stripe_customer_id": cust, "value": strconv.FormatInt(d.value, 10)}}
	// The identifier is also the idempotency key: a retry after a worker
	// died before recording the answer gets Stripe's first answer back
	// instead of a duplicate-identifier error, which would keep the event
	// pending for ever.
	p.SetIdempotencyKey(d.id)
	_, err := r.api.BillingMeterEvents.New(p)
	if err != nil && d.first == nil && refusedUnsent(err) {
		if _, uerr := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET first_attempt_at = NULL WHERE identifier = $1`, d.id); uerr != nil {
			return fmt.Errorf("%w (and undo the first attempt: %v)", err, uerr)
		}
	}
	return err
}

// refusedUnsent reports whether err shows that Stripe did not record the
// event: the connection was refused, or Stripe answered with a client
// error other than a conflict (an idempotent request still running).
func refusedUnsent(err error) bool {
	var se *stripe.Error
	if errors.As(err, &se) {
		return se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 && se.HTTPStatusCode != http.StatusConflict
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// resendOrSettle handles a pending event first sent longer than
// ResendWindow ago, which Stripe may hold under an identifier it no
// longer recognises. It reads Stripe's summary of the customer's meter for
// the event's hour, in which this event is the only one: the event's value
// there means Stripe has it (the row is marked sent); nothing there means
// it never arrived, and the caller sends it (done false) as if for the
// first time; anything else holds the row ('held', with the reason) for
// an operator: `tenantd admin billing reconcile` lists it. A summary that
// cannot be read is an error: the row is retried with backoff, and not
// sent.
func (r *Reporter) resendOrSettle(ctx context.Context, d *due, cust string) (done bool, err error) {
	var meterID string
	if err := r.cfg.DB.QueryRow(ctx, `SELECT stripe_meter_id FROM billing_meters WHERE meter = $1`, d.meter).Scan(&meterID); err != nil {
		return false, fmt.Errorf("read stripe meter %s: %w", d.meter, err)
	}
	it := r.api.BillingMeterEventSummaries.List(&stripe.BillingMeterEventSummaryListParams{ID: stripe.String(meterID),
		Customer: stripe.String(cust), StartTime: stripe.Int64(d.hour.Unix()), EndTime: stripe.Int64(d.hour.Add(time.Hour).Unix())})
	var inStripe float64
	for it.Next() {
		inStripe += it.BillingMeterEventSummary().AggregatedValue
	}
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("read Stripe's summary of the hour, to settle an event first sent over %s ago: %w", ResendWindow, err)
	}
	hold := ""
	switch {
	case inStripe == float64(d.value):
		r.cfg.Logger.Info("meter event first sent over the resend window ago is in Stripe; marked sent", "identifier", d.id)
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET state = 'sent', sent_at = now(), last_error = '' WHERE identifier = $1`, d.id); err != nil {
			return true, fmt.Errorf("record meter event sent: %w", err)
		}
		return true, nil
	case inStripe == 0:
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET first_attempt_at = NULL WHERE identifier = $1`, d.id); err != nil {
			return true, fmt.Errorf("restart the resend window: %w", err)
		}
		d.first = nil
		return false, nil
	default:
		hold = fmt.Sprintf("first sent %s, over %s ago; Stripe's summary of the hour holds %v, the event %d: resending could bill twice",
			d.first.UTC().Format(time.RFC3339), ResendWindow, inStripe, d.value)
	}
	r.cfg.Logger.Warn("meter event held: not resent past Stripe's identifier window", "identifier", d.id, "reason", hold)
	if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_outbox SET state = 'held', last_error = $2 WHERE identifier = $1`, d.id, hold); err != nil {
		return true, fmt.Errorf("hold meter event: %w", err)
	}
	return true, nil
}
