package billing_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// stripeGate carries the worker's requests to stripe-mock, refusing them
// all while down (a Stripe outage), and keeps the customer creations that
// reached Stripe.
type stripeGate struct {
	next http.RoundTripper
	// mu guards the fields below.
	mu        sync.Mutex
	down      bool
	refused   int
	customers []url.Values
}

var errStripeDown = errors.New("injected: stripe is unreachable")

func (g *stripeGate) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	down := g.down
	if down {
		g.refused++
	}
	g.mu.Unlock()
	if down {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errStripeDown
	}
	var form url.Values
	if req.URL.Path == "/v1/customers" && req.Method == http.MethodPost && req.Body != nil {
		form = readForm(req)
	}
	resp, err := g.next.RoundTrip(req)
	if err == nil && form != nil && resp.StatusCode == http.StatusOK {
		g.mu.Lock()
		g.customers = append(g.customers, form)
		g.mu.Unlock()
	}
	return resp, err
}

func (g *stripeGate) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// TestSignupCustomerThroughOutbox: confirming a signup while Stripe is
// down succeeds and leaves one pending customer request in the outbox;
// the worker's rounds during the outage record the failure and back off;
// once Stripe answers (stripe-mock) the next due round creates the
// tenant's customer, named and mailed as signed up, with its tenant id in
// metadata and an idempotency key of its tenant id, exactly once.
func TestSignupCustomerThroughOutbox(t *testing.T) {
	ctx := context.Background()
	cp := cptest.Start(t, cptest.TestAddrs)
	l := &billing.Ledger{DB: cp.DB} // on the control plane's database

	gate := &stripeGate{next: http.DefaultTransport, down: true}
	clock := time.Now()
	r, err := billing.NewReporter(billing.StripeConfig{DB: l.DB, Key: "sk_test_123", URL: testkit.StripeMock(t),
		HTTPClient: &http.Client{Transport: gate, Timeout: 10 * time.Second}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	// Stripe is down before, during and after the signup.
	if _, err := r.RunOnce(ctx); err == nil {
		t.Fatal("a worker round with Stripe down and no meters yet succeeded")
	}
	req := api.SignupRequest{TenantName: "billed", Email: "owner@billed.test", Password: "password-billed-1"}
	res, err := cptest.SignUp(ctx, cp.Anon, cp.MailDir, req)
	if err != nil {
		t.Fatalf("signup with Stripe down: %v", err)
	}
	tenant := res.Tenant.ID
	// The outbox row is due from the database's now() at signup.
	clock = time.Now().Add(time.Second)
	if _, err := r.RunOnce(ctx); err == nil {
		t.Fatal("a worker round with Stripe down succeeded")
	}
	var state, lastErr string
	var attempts int
	var next time.Time
	if err := l.DB.QueryRow(ctx, `SELECT state, attempts, last_error, next_attempt_at FROM billing_customer_outbox WHERE tenant_id = $1`,
		tenant).Scan(&state, &attempts, &lastErr, &next); err != nil {
		t.Fatalf("customer outbox row of the new tenant: %v", err)
	}
	if state != "pending" || attempts != 1 || lastErr == "" || !next.After(clock) {
		t.Fatalf("outbox after a failed round: state %s attempts %d error %q next %v; want pending, 1, an error, later than %v",
			state, attempts, lastErr, next, clock)
	}
	var n int
	if err := l.DB.QueryRow(ctx, `SELECT count(*) FROM billing_customers`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("customers with Stripe down: %d %v", n, err)
	}

	gate.setDown(false)
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(gate.customers) != 0 {
		t.Fatalf("a customer was created before its backoff ended: %v", gate.customers)
	}
	clock = clock.Add(time.Minute) // past the backoff
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil { // nothing more to do
		t.Fatal(err)
	}
	if len(gate.customers) != 1 {
		t.Fatalf("%d customers created, want 1: %v", len(gate.customers), gate.customers)
	}
	c := gate.customers[0]
	if c.Get("name") != "billed" || c.Get("email") != req.Email || c.Get("metadata[sluice_tenant_id]") != tenant {
		t.Fatalf("customer created with %v, want name billed, email %s, metadata sluice_tenant_id %s", c, req.Email, tenant)
	}
	var cust string
	if err := l.DB.QueryRow(ctx, `SELECT o.state, c.stripe_customer_id FROM billing_customer_outbox o
		JOIN billing_customers c USING (tenant_id) WHERE tenant_id = $1`, tenant).Scan(&state, &cust); err != nil {
		t.Fatal(err)
	}
	if state != "created" || cust == "" {
		t.Fatalf("after Stripe answered: outbox %s, customer %q", state, cust)
	}
}
