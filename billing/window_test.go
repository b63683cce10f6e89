package billing_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/contract/testkit"
)

// windowProxy stands between the reporter and stripe-mock: it loses the
// answers to the meter events it is told to (after stripe-mock took
// them), refuses the connection for others (they never reach Stripe),
// and answers meter event summaries, which stateless stripe-mock cannot,
// with the values the test says Stripe holds per hour.
type windowProxy struct {
	next    http.RoundTripper
	mu      sync.Mutex
	lose    map[string]bool
	refuse  map[string]bool
	summary map[int64]float64 // by the hour's start
	broken  map[int64]bool    // hours whose summary Stripe fails to answer
	events  map[string]int    // meter events stripe-mock took, by identifier
	asked   map[int64]int     // summaries asked for, by hour
}

func (p *windowProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.HasSuffix(req.URL.Path, "/event_summaries") {
		start, _ := strconv.ParseInt(req.URL.Query().Get("start_time"), 10, 64)
		p.asked[start]++
		if p.broken[start] {
			return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(`{"error":{"type":"api_error","message":"injected"}}`)), Request: req}, nil
		}
		body := fmt.Sprintf(`{"object":"list","url":%q,"has_more":false,"data":[{"id":"mtrusg_1","object":"billing.meter_event_summary","aggregated_value":%v,"start_time":%d,"end_time":%d,"livemode":false,"meter":"mtr_1"}]}`,
			req.URL.Path, p.summary[start], start, start+3600)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	if req.URL.Path != "/v1/billing/meter_events" {
		return p.next.RoundTrip(req)
	}
	id := readForm(req).Get("identifier")
	if p.refuse[id] {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		p.events[id]++
	}
	if p.lose[id] {
		resp.Body.Close()
		return nil, errLostAnswer
	}
	return resp, nil
}

// TestStripeResendWindow: an event whose answers were lost is resent with
// its identifier while Stripe still recognises it (within ResendWindow of
// the first request); past that it is not resent blindly: Stripe's summary
// of its hour settles it (the event's value there: marked sent, nothing
// sent; nothing there: sent again; anything else: held, and reconcile says
// why; a summary Stripe fails to answer: retried, not sent). An event whose requests never reached Stripe (connection refused)
// has no first attempt, so it is sent however old its hour.
func TestStripeResendWindow(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	h := func(i int) time.Time { return hour0.Add(time.Duration(i) * time.Hour) }
	for i, en := range []billing.Entry{
		e("t1", "tp", "bytes_in", h(0), 120), // in Stripe after all
		e("t1", "tp", "bytes_in", h(1), 30),  // never arrived
		e("t1", "tp", "bytes_in", h(2), 7),   // Stripe holds another value
		e("t1", "tp", "bytes_in", h(3), 9),   // never reached Stripe
		e("t1", "tp", "bytes_in", h(4), 11),  // never arrived; its summary fails once
	} {
		if res, err := l.Ship(ctx, billing.Shipment{Cell: "c1", Partition: 1, From: int64(i), Next: int64(i) + 1,
			Records: []jsonRaw{rec(t, 1, "b", int64(i)+1, en)}}); err != nil || !res.Applied {
			t.Fatalf("ship: %+v %v", res, err)
		}
	}
	id := func(i int) string { return billing.Identifier("t1", "bytes_in", h(i)) }
	p := &windowProxy{next: http.DefaultTransport, lose: map[string]bool{id(0): true, id(1): true, id(2): true, id(4): true},
		refuse: map[string]bool{id(3): true}, summary: map[int64]float64{h(0).Unix(): 120, h(2).Unix(): 5},
		broken: map[int64]bool{h(4).Unix(): true}, events: map[string]int{}, asked: map[int64]int{}}
	clock := h(6)
	r, err := billing.NewReporter(billing.StripeConfig{DB: l.DB, Key: "sk_test_123", URL: testkit.StripeMock(t),
		HTTPClient: &http.Client{Transport: p, Timeout: 10 * time.Second}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	round := func(want int) {
		t.Helper()
		if sent, err := r.RunOnce(ctx); err != nil || sent != want {
			t.Fatalf("round at %s: sent %d, %v; want %d", clock, sent, err, want)
		}
	}
	firsts := func() map[string]bool {
		t.Helper()
		out := map[string]bool{}
		rows, err := l.DB.Query(ctx, `SELECT identifier, first_attempt_at IS NOT NULL FROM billing_outbox`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var has bool
			if err := rows.Scan(&s, &has); err != nil {
				t.Fatal(err)
			}
			out[s] = has
		}
		return out
	}

	round(0) // every answer lost or refused
	if f := firsts(); !f[id(0)] || !f[id(1)] || !f[id(2)] || !f[id(4)] || f[id(3)] {
		t.Fatalf("first attempts recorded %v: want the three that reached Stripe, not the refused one", f)
	}
	clock = clock.Add(22 * time.Hour) // within the window: resent blindly, as Stripe recognises them
	round(0)
	for _, i := range []int{0, 1, 2, 4} {
		if p.events[id(i)] != 2 {
			t.Fatalf("within the window, event %d reached Stripe %d times, want 2 (the resend)", i, p.events[id(i)])
		}
	}
	if len(p.asked) != 0 {
		t.Fatalf("summaries asked within the window: %v", p.asked)
	}

	clock = clock.Add(time.Hour + time.Minute) // past ResendWindow of the first requests
	p.lose, p.refuse = map[string]bool{}, map[string]bool{}
	round(2) // hour 1 sent again (nothing in Stripe), hour 3 sent for the first time
	if p.events[id(0)] != 2 || p.events[id(1)] != 3 || p.events[id(2)] != 2 || p.events[id(3)] != 1 || p.events[id(4)] != 2 {
		t.Fatalf("meter events by identifier %v: want hour 0 not resent (in Stripe), hour 1 resent, hour 2 held, hour 3 sent once, hour 4 not sent (its summary failed)", p.events)
	}
	if p.asked[h(0).Unix()] != 1 || p.asked[h(1).Unix()] != 1 || p.asked[h(2).Unix()] != 1 || p.asked[h(3).Unix()] != 0 || p.asked[h(4).Unix()] != 1 {
		t.Fatalf("summaries asked %v: want one for each of hours 0-2 and 4, none for the never-sent hour 3", p.asked)
	}
	var state, lastErr string
	if err := l.DB.QueryRow(ctx, `SELECT state, last_error FROM billing_outbox WHERE identifier = $1`, id(4)).Scan(&state, &lastErr); err != nil ||
		state != "pending" || !strings.Contains(lastErr, "summary") {
		t.Fatalf("hour 4 after its summary failed: %s %q %v; want pending, retried", state, lastErr, err)
	}
	delete(p.broken, h(4).Unix())
	clock = clock.Add(time.Minute) // past its backoff
	round(1)                       // nothing in Stripe for hour 4: sent again
	if p.events[id(4)] != 3 {
		t.Fatalf("hour 4 reached Stripe %d times, want 3", p.events[id(4)])
	}
	states := map[string]string{}
	rows, err := l.DB.Query(ctx, `SELECT identifier, state FROM billing_outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s, st string
		if err := rows.Scan(&s, &st); err != nil {
			t.Fatal(err)
		}
		states[s] = st
	}
	rows.Close()
	if states[id(0)] != "sent" || states[id(1)] != "sent" || states[id(2)] != "held" || states[id(3)] != "sent" || states[id(4)] != "sent" {
		t.Fatalf("outbox states %v", states)
	}
	clock = clock.Add(48 * time.Hour)
	round(0) // a held event stays held
	if p.events[id(2)] != 2 {
		t.Fatalf("a held event was sent again: %v", p.events)
	}
	d, err := l.Reconcile(ctx, h(-1), clock, 10*time.Minute)
	if err != nil || len(d) != 1 || d[0].Hour != h(2) || d[0].State != "held" || !strings.Contains(d[0].Reason, "holds 5, the event 7") {
		t.Fatalf("reconcile: %+v %v; want hour 2 held, with Stripe's value and the event's", d, err)
	}
}
