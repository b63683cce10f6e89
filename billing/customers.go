package billing

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	stripe "github.com/stripe/stripe-go/v76"
)

// EnqueueCustomer asks the billing worker, in the caller's transaction, to
// create the tenant's Stripe customer (named name, with the owner's email).
// Nothing talks to Stripe here, so a Stripe outage cannot fail the caller;
// the Reporter creates the customer on its next rounds. Enqueueing a
// tenant twice keeps the first request.
func EnqueueCustomer(ctx context.Context, tx pgx.Tx, tenant, name, email string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO billing_customer_outbox (tenant_id, name, email) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id) DO NOTHING`, tenant, name, email); err != nil {
		return fmt.Errorf("enqueue stripe customer: %w", err)
	}
	return nil
}

// createCustomers creates the Stripe customers the outbox asks for that
// are due, oldest first, and records each outcome: created (the customer
// is in billing_customers) or a retry after backoff. It returns how many
// it created; a Stripe failure is a retry, not an error.
func (r *Reporter) createCustomers(ctx context.Context) (int, error) {
	rows, err := r.cfg.DB.Query(ctx, `SELECT tenant_id, attempts FROM billing_customer_outbox
		WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY enqueued_at, tenant_id LIMIT 500`, r.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("read customer outbox: %w", err)
	}
	type due struct {
		tenant   string
		attempts int
	}
	todo, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (d due, err error) {
		err = row.Scan(&d.tenant, &d.attempts)
		return d, err
	})
	if err != nil {
		return 0, fmt.Errorf("read customer outbox: %w", err)
	}
	created := 0
	for _, d := range todo {
		if _, err := r.customer(ctx, d.tenant); err != nil {
			r.cfg.Logger.Warn("create stripe customer; will retry", "tenant_id", d.tenant, "attempts", d.attempts+1, "err", err)
			if _, uerr := r.cfg.DB.Exec(ctx, `UPDATE billing_customer_outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3
				WHERE tenant_id = $1`, d.tenant, r.cfg.Now().Add(backoff(d.attempts)), err.Error()); uerr != nil {
				return created, fmt.Errorf("record stripe customer failure: %w", uerr)
			}
			continue
		}
		if _, err := r.cfg.DB.Exec(ctx, `UPDATE billing_customer_outbox SET state = 'created', created_at = $2, attempts = attempts + 1,
			last_error = '' WHERE tenant_id = $1`, d.tenant, r.cfg.Now()); err != nil {
			return created, fmt.Errorf("record stripe customer created: %w", err)
		}
		created++
	}
	return created, nil
}

// customer returns the tenant's Stripe customer, creating it (with an
// idempotency key of its tenant id) the first time: named and mailed as
// the signup enqueued it, if it did.
func (r *Reporter) customer(ctx context.Context, tenant string) (string, error) {
	var id string
	err := r.cfg.DB.QueryRow(ctx, `SELECT stripe_customer_id FROM billing_customers WHERE tenant_id = $1`, tenant).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read stripe customer: %w", err)
	}
	p := &stripe.CustomerParams{Description: stripe.String("Sluice tenant " + tenant)}
	var name, email string
	err = r.cfg.DB.QueryRow(ctx, `SELECT name, email FROM billing_customer_outbox WHERE tenant_id = $1`, tenant).Scan(&name, &email)
	switch {
	case err == nil:
		p.Name, p.Email = stripe.String(name), stripe.String(email)
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("read customer outbox: %w", err)
	}
	p.AddMetadata("sluice_tenant_id", tenant)
	p.SetIdempotencyKey("sluice-customer-" + tenant)
	c, err := r.api.Customers.New(p)
	if err != nil {
		return "", fmt.Errorf("create stripe customer: %w", err)
	}
	if err := r.cfg.DB.QueryRow(ctx, `INSERT INTO billing_customers (tenant_id, stripe_customer_id) VALUES ($1, $2)
		ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id RETURNING stripe_customer_id`, tenant, c.ID).Scan(&id); err != nil {
		return "", fmt.Errorf("record stripe customer: %w", err)
	}
	return id, nil
}
