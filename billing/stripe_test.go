package billing_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/contract/testkit"
)

// recorder keeps the meter events that reached stripe-mock, and can lose
// the answer to the next one after it was delivered: a worker killed
// between sending and recording.
type recorder struct {
	next     http.RoundTripper
	mu       sync.Mutex
	events   []url.Values
	loseNext bool
}

var errLostAnswer = errors.New("injected: the answer was lost after stripe received the event")

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var form url.Values
	if req.URL.Path == "/v1/billing/meter_events" && req.Body != nil {
		form = readForm(req)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || form == nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if resp.StatusCode == http.StatusOK {
		r.events = append(r.events, form)
	}
	if r.loseNext {
		r.loseNext = false
		resp.Body.Close()
		return nil, errLostAnswer
	}
	return resp, nil
}

// readForm parses the form req's body carries and puts the body back for
// the next transport, so that a test's round tripper can see what a
// request asked of Stripe and still send it on.
func readForm(req *http.Request) url.Values {
	b, _ := io.ReadAll(req.Body)
	req.Body.Close()
	form, _ := url.ParseQuery(string(b))
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	return form
}

// TestStripeOneEventPerClosedHour: every closed (tenant, meter, hour) of
// the ledger reaches stripe-mock as a meter event with its deterministic
// identifier, customer and value; an event whose answer is lost is sent
// again with the same identifier and no other; an open hour is not sent;
// a second worker round sends nothing.
func TestStripeOneEventPerClosedHour(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	ship := func(from int64, seq int64, entries ...billing.Entry) {
		t.Helper()
		if res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 1, From: from, Next: from + 1, Records: []jsonRaw{rec(t, 1, "b", seq, entries...)}}); err != nil || !res.Applied {
			t.Fatalf("ship: %+v %v", res, err)
		}
	}
	now := hour0.Add(3*time.Hour + 30*time.Minute)
	ship(0, 1, e("t1", "tp", "bytes_in", hour0, 100), e("t1", "tp", "bytes_in", hour0, 20), e("t2", "", "bytes_out", hour0, 7))
	ship(1, 2, e("t1", "tp", "messages_in", hour0.Add(time.Hour), 3))
	ship(2, 3, e("t1", "tp", "bytes_in", now.Truncate(time.Hour), 999)) // the open hour

	rec := &recorder{next: http.DefaultTransport, loseNext: true}
	var clock time.Time = now
	r, err := billing.NewReporter(billing.StripeConfig{DB: l.DB, Key: "sk_test_123", URL: testkit.StripeMock(t),
		HTTPClient: &http.Client{Transport: rec, Timeout: 10 * time.Second}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 2 {
		var n int
		var errs []string
		rows, _ := l.DB.Query(ctx, `SELECT last_error FROM billing_outbox`)
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			errs = append(errs, s)
			n++
		}
		rows.Close()
		t.Fatalf("first round sent %d events, want 2 (one answer lost); outbox %d rows, errors %q", sent, n, errs)
	}
	clock = clock.Add(time.Minute) // past the backoff
	if sent, err = r.RunOnce(ctx); err != nil || sent != 1 {
		t.Fatalf("second round: sent %d, %v; want the lost one again", sent, err)
	}
	if sent, err = r.RunOnce(ctx); err != nil || sent != 0 {
		t.Fatalf("third round: sent %d, %v; want none", sent, err)
	}

	var cust1, cust2 string
	if err := l.DB.QueryRow(ctx, `SELECT (SELECT stripe_customer_id FROM billing_customers WHERE tenant_id = 't1'),
		(SELECT stripe_customer_id FROM billing_customers WHERE tenant_id = 't2')`).Scan(&cust1, &cust2); err != nil {
		t.Fatal(err)
	}
	want := map[string][3]string{
		billing.Identifier("t1", "bytes_in", hour0):                   {"sluice_bytes_in", cust1, "120"},
		billing.Identifier("t2", "bytes_out", hour0):                  {"sluice_bytes_out", cust2, "7"},
		billing.Identifier("t1", "messages_in", hour0.Add(time.Hour)): {"sluice_messages_in", cust1, "3"},
	}
	got := map[string]int{}
	for _, ev := range rec.events {
		id := ev.Get("identifier")
		w, ok := want[id]
		if !ok {
			t.Fatalf("unexpected meter event %v", ev)
		}
		if ev.Get("event_name") != w[0] || ev.Get("payload[stripe_customer_id]") != w[1] || ev.Get("payload[value]") != w[2] {
			t.Fatalf("meter event %v, want event %s customer %s value %s", ev, w[0], w[1], w[2])
		}
		got[id]++
	}
	if len(got) != len(want) {
		t.Fatalf("identifiers sent %v, want one of each of %d", got, len(want))
	}
	dups := 0
	for _, n := range got {
		dups += n - 1
	}
	if dups != 1 {
		t.Fatalf("identifiers sent %v: want exactly the lost one twice", got)
	}
	var pending int
	if err := l.DB.QueryRow(ctx, `SELECT count(*) FROM billing_outbox WHERE state <> 'sent'`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("outbox rows not sent: %d %v", pending, err)
	}

	// Reconcile: all sent and equal to the ledger; then usage shipped
	// late for a closed hour shows as a difference.
	if d, err := l.Reconcile(ctx, hour0.Add(-time.Hour), clock, 10*time.Minute); err != nil || len(d) != 0 {
		t.Fatalf("reconcile after sending: %+v %v", d, err)
	}
	ship(3, 4, e("t1", "tp", "bytes_in", hour0, 5))
	d, err := l.Reconcile(ctx, hour0.Add(-time.Hour), clock, 10*time.Minute)
	if err != nil || len(d) != 1 || d[0].Tenant != "t1" || d[0].Meter != "bytes_in" || d[0].Ledger != 125 || d[0].Outbox != 120 || d[0].State != "sent" {
		t.Fatalf("reconcile after a late shipment: %+v %v", d, err)
	}
}

// TestStripeNeedsAKey: without a key there is no reporter (billing keeps
// the ledger only).
func TestStripeNeedsAKey(t *testing.T) {
	if _, err := billing.NewReporter(billing.StripeConfig{DB: newLedger(t).DB}); err == nil {
		t.Fatal("a reporter without a Stripe key")
	}
}
