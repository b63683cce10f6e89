package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// startStripeMock runs stripe-mock v0.203.0 from .cache/bin (`make
// tools`) on free loopback ports and returns its HTTP URL.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../../../.cache/bin/stripe-mock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("stripe-mock is not installed (%v): run `make tools`", err)
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-http-addr", addrs[0], "-https-addr", addrs[1])
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	err = launch.WaitFor(context.Background(), "stripe-mock listening", 30*time.Second, func() error {
		c, err := net.Dial("tcp", addrs[0])
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addrs[0]
}

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

// TestBillingWorkerKilledBetweenSendAndRecord: the control plane that
// runs the billing worker is SIGKILLed after stripe-mock received a meter
// event and before the worker recorded it as sent. Restarted, the worker
// sends that event again with the same identifier and idempotency key,
// and every other hour once; the outbox ends with one sent row per
// (tenant, meter, closed hour) of the ledger, and reconcile finds no
// difference.
func TestBillingWorkerKilledBetweenSendAndRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane three times and stripe-mock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "tenantd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../tenantd").CombinedOutput(); err != nil {
		t.Fatalf("build tenantd: %v\n%s", err, out)
	}
	db, err := launch.CreateDB(ctx, pgtest.AdminURL(), "sluice_billkill_")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Drop() })
	listen, err := launch.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	startCP := func() *launch.ControlPlane {
		t.Helper()
		cp, err := launch.StartControlPlane(ctx, bin, db.URL, listen, t.TempDir(), "info")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cp.Proc.Stop(15 * time.Second) })
		return cp
	}

	// A tenant signed up (its Stripe customer enqueued) by a control plane
	// without a Stripe key, which sends nothing.
	t.Setenv("SLUICE_STRIPE_KEY", "")
	cp := startCP()
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
	cp.Proc.Stop(15 * time.Second)

	// Usage of two closed hours in the ledger, shipped as a cell would.
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l := &billing.Ledger{DB: pool}
	h1 := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	h2 := h1.Add(time.Hour)
	entries := []billing.Entry{
		{Tenant: tenant.ID, Topic: "t", Meter: "bytes_in", Hour: h1.Unix(), Value: 1000},
		{Tenant: tenant.ID, Topic: "t", Meter: "messages_in", Hour: h1.Unix(), Value: 10},
		{Tenant: tenant.ID, Topic: "t", Meter: "partition_seconds", Hour: h1.Unix(), Value: 10800},
		{Tenant: tenant.ID, Topic: "t", Meter: "bytes_out", Hour: h2.Unix(), Value: 2000},
		{Tenant: tenant.ID, Topic: "t", Meter: "messages_out", Hour: h2.Unix(), Value: 20},
		{Tenant: tenant.ID, Topic: "u", Meter: "bytes_out", Hour: h2.Unix(), Value: 500},
	}
	raw, err := json.Marshal(billing.Record{Version: 2, Node: 1, Boot: "kill", Seq: 1, At: time.Now().Unix(), Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := l.Ship(ctx, billing.Shipment{Cell: "kill-cell", Partition: 0, From: 0, Next: 1, Records: []json.RawMessage{raw}}); err != nil || !res.Applied {
		t.Fatalf("ship usage: %+v %v", res, err)
	}
	want := map[string]string{} // identifier → value: per (tenant, meter, hour)
	for _, e := range entries {
		id := billing.Identifier(e.Tenant, e.Meter, time.Unix(e.Hour, 0))
		v, _ := strconv.ParseInt(want[id], 10, 64)
		want[id] = strconv.FormatInt(v+e.Value, 10)
	}

	// The control plane with a Stripe key, through the proxy: SIGKILLed
	// while the proxy holds the answer to the first meter event.
	proxy := &stripeProxy{target: startStripeMock(t), held: make(chan forwarded, 1), armed: true}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	t.Setenv("SLUICE_STRIPE_KEY", "sk_test_123")
	t.Setenv("SLUICE_STRIPE_URL", srv.URL)
	cp = startCP()
	var held forwarded
	select {
	case held = <-proxy.held:
	case <-ctx.Done():
		t.Fatalf("no meter event reached stripe-mock: %v", cp.Proc.Exited())
	}
	cp.Proc.Kill()
	heldID := held.form.Get("identifier")
	if held.status != http.StatusOK {
		t.Fatalf("stripe-mock answered the held meter event %s with %d", heldID, held.status)
	}
	var state string
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT state, attempts FROM billing_outbox WHERE identifier = $1`, heldID).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || attempts != 0 {
		t.Fatalf("the killed worker recorded the held event %s: state %s, attempts %d", heldID, state, attempts)
	}

	// Restarted, the worker sends what is pending.
	startCP()
	err = launch.WaitFor(ctx, "every outbox row sent", 90*time.Second, func() error {
		var sent, rows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'sent'), count(*) FROM billing_outbox`).Scan(&sent, &rows); err != nil {
			return err
		}
		if sent != len(want) || rows != len(want) {
			return fmt.Errorf("%d of %d outbox rows sent, want %d", sent, rows, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// What reached stripe-mock: each identifier of the ledger with its
	// value, once, except the held one, which is sent again identically.
	seen := map[string]int{}
	for _, ev := range proxy.forwarded() {
		id := ev.form.Get("identifier")
		v, ok := want[id]
		switch {
		case !ok:
			t.Fatalf("meter event with an unexpected identifier: %v", ev.form)
		case ev.status != http.StatusOK:
			t.Fatalf("stripe-mock answered %s with %d", id, ev.status)
		case ev.form.Get("payload[value]") != v:
			t.Fatalf("meter event %s carries value %s, the ledger %s", id, ev.form.Get("payload[value]"), v)
		case ev.idempotency != id:
			t.Fatalf("meter event %s sent with idempotency key %q, want its identifier", id, ev.idempotency)
		}
		if id == heldID && seen[id] == 1 && ev.form.Encode() != held.form.Encode() {
			t.Fatalf("the retry of %s differs: %v, first %v", id, ev.form, held.form)
		}
		seen[id]++
	}
	for id := range want {
		n := 1
		if id == heldID {
			n = 2
		}
		if seen[id] != n {
			t.Fatalf("stripe-mock received %s %d times, want %d (all: %v)", id, seen[id], n, seen)
		}
	}
	var attemptsHeld int
	if err := pool.QueryRow(ctx, `SELECT attempts FROM billing_outbox WHERE identifier = $1`, heldID).Scan(&attemptsHeld); err != nil || attemptsHeld != 1 {
		t.Fatalf("the held event's outbox attempts: %d %v, want 1 (recorded once, by the restarted worker)", attemptsHeld, err)
	}
	if d, err := l.Reconcile(ctx, h1.Add(-time.Hour), time.Now(), billing.DefaultCloseAfter); err != nil || len(d) != 0 {
		t.Fatalf("reconcile: %+v %v", d, err)
	}
	t.Logf("held %s; stripe-mock received %v", heldID, seen)
}
