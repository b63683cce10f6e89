package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// forwarded is a meter event the proxy forwarded to stripe-mock.
type forwarded struct {
	form        url.Values
	idempotency string // the Idempotency-Key header
	status      int    // stripe-mock's answer
}

// stripeProxy forwards every request to stripe-mock and records the meter
// events it forwarded. Its one fault: once armed, it holds stripe-mock's
// answer to the next meter event, reports the event on held and never
// answers it (the caller is killed meanwhile).
type stripeProxy struct {
	target string
	held   chan forwarded
	// mu guards the fields below.
	mu     sync.Mutex
	events []forwarded
	armed  bool
}

func (p *stripeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	// Stripe gets the request even if the caller is gone meanwhile.
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.URL.Path == "/v1/billing/meter_events" {
		form, _ := url.ParseQuery(string(body))
		ev := forwarded{form: form, idempotency: r.Header.Get("Idempotency-Key"), status: resp.StatusCode}
		p.mu.Lock()
		p.events = append(p.events, ev)
		hold := p.armed
		p.armed = false
		p.mu.Unlock()
		if hold {
			p.held <- ev
			<-r.Context().Done() // the worker's process is killed
			return
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func (p *stripeProxy) forwarded() []forwarded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]forwarded(nil), p.events...)
}

// billingRun is a billing scenario's fixture: a scratch database holding
// a signed-up tenant and its usage of two closed hours, a control plane
// on it that runs no billing worker (-billing-worker=false; given a
// Stripe key and a trap for a Stripe URL anyway, so that a worker it ran
// would show), and stripe-mock behind a recording proxy armed to hold
// its answer to the first meter event.
type billingRun struct {
	t      *testing.T
	ctx    context.Context
	bin    string
	db     *launch.DB
	pool   *pgxpool.Pool
	ledger *billing.Ledger
	h1     time.Time
	proxy  *stripeProxy
	stripe string // the proxy's URL
	// want is the meter events of the ledger: identifier → value.
	want    map[string]string
	trapped atomic.Int64 // requests that reached the control plane's Stripe URL
}

func newBillingRun(t *testing.T, ctx context.Context) *billingRun {
	t.Helper()
	r := &billingRun{t: t, ctx: ctx, want: map[string]string{}}
	r.bin = testkit.BuildTenantd(t, t.TempDir())
	var err error
	if r.db, err = launch.CreateDB(ctx, pgtest.AdminURL(), "sluice_billkill_"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.db.Drop() })
	listen, err := launch.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.trapped.Add(1)
		http.Error(w, "the control plane runs no billing worker", http.StatusTeapot)
	}))
	t.Cleanup(trap.Close)
	t.Setenv("SLUICE_STRIPE_KEY", "sk_test_trap")
	t.Setenv("SLUICE_STRIPE_URL", trap.URL)
	t.Setenv("SLUICE_BILLING_WORKER", "false")
	t.Setenv("SLUICE_BILLING_INTERVAL", "200ms")
	cp, err := launch.StartControlPlane(ctx, r.bin, r.db.URL, listen, t.TempDir(), "info")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Proc.Stop(15 * time.Second) })
	// A shared cell to sign up on; it needs no brokers here.
	if _, err := cp.Operator.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "billing", Kind: "shared", Description: "billing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Operator.AdminCreateCell(ctx, api.CreateCellRequest{ID: "billing-cell", PoolID: "billing"}); err != nil {
		t.Fatal(err)
	}
	tenant, err := launch.SignUp(ctx, cp, "billed", "")
	if err != nil {
		t.Fatal(err)
	}

	// Usage of two closed hours in the ledger, shipped as a cell would.
	if r.pool, err = pgxpool.New(ctx, r.db.URL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.pool.Close)
	r.ledger = &billing.Ledger{DB: r.pool}
	r.h1 = time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	h2 := r.h1.Add(time.Hour)
	entries := []billing.Entry{
		{Tenant: tenant.ID, Topic: "t", Meter: "bytes_in", Hour: r.h1.Unix(), Value: 1000},
		{Tenant: tenant.ID, Topic: "t", Meter: "messages_in", Hour: r.h1.Unix(), Value: 10},
		{Tenant: tenant.ID, Topic: "t", Meter: "partition_seconds", Hour: r.h1.Unix(), Value: 10800},
		{Tenant: tenant.ID, Topic: "t", Meter: "bytes_out", Hour: h2.Unix(), Value: 2000},
		{Tenant: tenant.ID, Topic: "t", Meter: "messages_out", Hour: h2.Unix(), Value: 20},
		{Tenant: tenant.ID, Topic: "u", Meter: "bytes_out", Hour: h2.Unix(), Value: 500},
	}
	raw, err := json.Marshal(billing.Record{Version: 2, Node: 1, Boot: "kill", Seq: 1, At: time.Now().Unix(), Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.ledger.Ship(ctx, billing.Shipment{Cell: "kill-cell", Partition: 0, From: 0, Next: 1, Records: []json.RawMessage{raw}}); err != nil || !res.Applied {
		t.Fatalf("ship usage: %+v %v", res, err)
	}
	for _, e := range entries {
		id := billing.Identifier(e.Tenant, e.Meter, time.Unix(e.Hour, 0))
		v, _ := strconv.ParseInt(r.want[id], 10, 64)
		r.want[id] = strconv.FormatInt(v+e.Value, 10)
	}

	r.proxy = &stripeProxy{target: testkit.StripeMock(t), held: make(chan forwarded, 1), armed: true}
	srv := httptest.NewServer(r.proxy)
	t.Cleanup(srv.Close)
	r.stripe = srv.URL
	return r
}

// billingProc is a running `tenantd billing`.
type billingProc struct {
	proc    *launch.Proc
	metrics string // its /metrics URL
}

// startBilling starts `tenantd billing` with a Stripe key and the proxy
// as its Stripe URL, a round every 200 ms, and waits until it is ready
// (a round reached the database).
func (r *billingRun) startBilling(name string) *billingProc {
	r.t.Helper()
	addrs, err := launch.FreeAddrs("127.0.0.1", 2)
	if err != nil {
		r.t.Fatal(err)
	}
	env := []string{"SLUICE_STRIPE_KEY=sk_test_123", "SLUICE_STRIPE_URL=" + r.stripe}
	p, err := launch.Start("tenantd billing "+name, filepath.Join(r.t.TempDir(), "billing.log"), env, r.bin, "billing",
		"-database-url", r.db.URL, "-health-listen", addrs[0], "-metrics-listen", addrs[1], "-log-level", "info")
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { p.Stop(15 * time.Second) })
	if err := p.WaitOK(r.ctx, "billing "+name+" ready", "http://"+addrs[0]+"/readyz", 60*time.Second); err != nil {
		r.t.Fatal(err)
	}
	return &billingProc{proc: p, metrics: "http://" + addrs[1] + "/metrics"}
}

// rounds is the process's count of rounds with result (worked,
// standby, ledger_only, failed), from its metrics.
func (b *billingProc) rounds(result string) (int, error) {
	resp, err := http.Get(b.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	prefix := `sluice_billing_rounds_total{result="` + result + `"} `
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
	}
	return 0, fmt.Errorf("no %s in the metrics", strings.TrimSpace(prefix))
}

// held waits for the meter event the proxy holds.
func (r *billingRun) held() forwarded {
	r.t.Helper()
	select {
	case ev := <-r.proxy.held:
		if ev.status != http.StatusOK {
			r.t.Fatalf("stripe-mock answered the held meter event %s with %d", ev.form.Get("identifier"), ev.status)
		}
		return ev
	case <-r.ctx.Done():
		r.t.Fatal("no meter event reached stripe-mock")
	}
	return forwarded{}
}

// checkPending: the held event's outbox row was not recorded by the
// killed worker.
func (r *billingRun) checkPending(id string) {
	r.t.Helper()
	var state string
	var attempts int
	if err := r.pool.QueryRow(r.ctx, `SELECT state, attempts FROM billing_outbox WHERE identifier = $1`, id).Scan(&state, &attempts); err != nil {
		r.t.Fatal(err)
	}
	if state != "pending" || attempts != 0 {
		r.t.Fatalf("the killed worker recorded the held event %s: state %s, attempts %d", id, state, attempts)
	}
}

// waitAllSent waits until every outbox row is sent.
func (r *billingRun) waitAllSent() {
	r.t.Helper()
	err := launch.WaitFor(r.ctx, "every outbox row sent", 90*time.Second, func() error {
		var sent, rows int
		if err := r.pool.QueryRow(r.ctx, `SELECT count(*) FILTER (WHERE state = 'sent'), count(*) FROM billing_outbox`).Scan(&sent, &rows); err != nil {
			return err
		}
		if sent != len(r.want) || rows != len(r.want) {
			return fmt.Errorf("%d of %d outbox rows sent, want %d", sent, rows, len(r.want))
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// checkSentOnce: what reached stripe-mock is each identifier of the
// ledger with its value, idempotency key = identifier, once, except the
// held one, sent again identically; its outbox row was recorded once,
// reconcile finds no difference, and the control plane never called
// Stripe.
func (r *billingRun) checkSentOnce(held forwarded) {
	r.t.Helper()
	heldID := held.form.Get("identifier")
	seen := map[string]int{}
	for _, ev := range r.proxy.forwarded() {
		id := ev.form.Get("identifier")
		v, ok := r.want[id]
		switch {
		case !ok:
			r.t.Fatalf("meter event with an unexpected identifier: %v", ev.form)
		case ev.status != http.StatusOK:
			r.t.Fatalf("stripe-mock answered %s with %d", id, ev.status)
		case ev.form.Get("payload[value]") != v:
			r.t.Fatalf("meter event %s carries value %s, the ledger %s", id, ev.form.Get("payload[value]"), v)
		case ev.idempotency != id:
			r.t.Fatalf("meter event %s sent with idempotency key %q, want its identifier", id, ev.idempotency)
		}
		if id == heldID && seen[id] == 1 && ev.form.Encode() != held.form.Encode() {
			r.t.Fatalf("the retry of %s differs: %v, first %v", id, ev.form, held.form)
		}
		seen[id]++
	}
	for id := range r.want {
		n := 1
		if id == heldID {
			n = 2
		}
		if seen[id] != n {
			r.t.Fatalf("stripe-mock received %s %d times, want %d (all: %v)", id, seen[id], n, seen)
		}
	}
	var attemptsHeld int
	if err := r.pool.QueryRow(r.ctx, `SELECT attempts FROM billing_outbox WHERE identifier = $1`, heldID).Scan(&attemptsHeld); err != nil || attemptsHeld != 1 {
		r.t.Fatalf("the held event's outbox attempts: %d %v, want 1 (recorded once, by the surviving worker)", attemptsHeld, err)
	}
	if d, err := r.ledger.Reconcile(r.ctx, r.h1.Add(-time.Hour), time.Now(), billing.DefaultCloseAfter); err != nil || len(d) != 0 {
		r.t.Fatalf("reconcile: %+v %v", d, err)
	}
	if n := r.trapped.Load(); n != 0 {
		r.t.Fatalf("the control plane (-billing-worker=false) made %d Stripe requests", n)
	}
	r.t.Logf("held %s; stripe-mock received %v", heldID, seen)
}

// TestBillingWorkerKilledBetweenSendAndRecord: the billing role (tenantd
// billing, beside a control plane that runs no worker) is SIGKILLed after
// stripe-mock received a meter event and before the worker recorded it
// as sent. Restarted, the worker sends that event again with the same
// identifier and idempotency key, and every other hour once; the outbox
// ends with one sent row per (tenant, meter, closed hour) of the ledger,
// and reconcile finds no difference.
func TestBillingWorkerKilledBetweenSendAndRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, the billing role twice and stripe-mock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := newBillingRun(t, ctx)

	w := r.startBilling("first")
	held := r.held()
	w.proc.Kill()
	r.checkPending(held.form.Get("identifier"))

	// Restarted, the worker sends what is pending.
	r.startBilling("restarted")
	r.waitAllSent()
	r.checkSentOnce(held)
}

// TestTwoBillingWorkersOneWorks: two billing processes on one database,
// one reports at a time (the Postgres advisory lock). While the first
// holds the lock (stripe-mock's answer to its first meter event held),
// the second stands by round after round and sends nothing; the first
// is SIGKILLed, the second takes over and sends the held event again
// (same identifier and idempotency key) and every other hour once; the
// first, restarted, finds nothing left to send.
func TestTwoBillingWorkersOneWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three billing processes and stripe-mock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := newBillingRun(t, ctx)

	a := r.startBilling("a")
	held := r.held()
	b := r.startBilling("b")
	err := launch.WaitFor(ctx, "billing b standing by", 60*time.Second, func() error {
		n, err := b.rounds("standby")
		if err == nil && n < 3 {
			err = fmt.Errorf("%d standby rounds", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if evs := r.proxy.forwarded(); len(evs) != 1 {
		t.Fatalf("%d meter events reached stripe-mock while one worker held the lock, want its 1", len(evs))
	}
	if n, err := b.rounds("worked"); err != nil || n != 0 {
		t.Fatalf("billing b worked %d rounds while a held the lock (%v)", n, err)
	}
	a.proc.Kill()
	r.checkPending(held.form.Get("identifier"))
	r.waitAllSent()
	if n, err := b.rounds("worked"); err != nil || n == 0 {
		t.Fatalf("billing b worked %d rounds after a was killed (%v)", n, err)
	}

	// a, restarted, works and finds nothing to send.
	a = r.startBilling("a restarted")
	err = launch.WaitFor(ctx, "billing a restarted doing rounds", 60*time.Second, func() error {
		wk, err1 := a.rounds("worked")
		sb, err2 := a.rounds("standby")
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if wk+sb < 3 {
			return fmt.Errorf("%d rounds", wk+sb)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.checkSentOnce(held)
}
