package controlplane_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/client"
)

type shipReply struct {
	Position int64 `json:"position"`
	Applied  bool  `json:"applied"`
}

// shipUsage sends one usage record for tenant as a cell's broker would.
func shipUsage(t *testing.T, cell *client.Client, part int32, from int64, seq int, tenant, topicID, meter string, hour time.Time, value int64) shipReply {
	t.Helper()
	rec := fmt.Sprintf(`{"v":1,"node":1,"boot":"test","seq":%d,"at":0,"entries":[{"tenant":%q,"topic":%q,"meter":%q,"hour":%d,"value":%d}]}`,
		seq, tenant, topicID, meter, hour.Unix(), value)
	var out shipReply
	body := map[string]any{"partition": part, "from": from, "next": from + 1, "records": []json.RawMessage{json.RawMessage(rec)}}
	if err := cell.Do(context.Background(), http.MethodPost, "/internal/v1/cells/cell-1/usage", body, &out); err != nil {
		t.Fatalf("ship usage: %v", err)
	}
	return out
}

type usageAnswer struct {
	Granularity string `json:"granularity"`
	Usage       []struct {
		TenantID string    `json:"tenant_id"`
		Topic    *string   `json:"topic"`
		TopicID  *string   `json:"topic_id"`
		Meter    string    `json:"meter"`
		Start    time.Time `json:"start"`
		Value    int64     `json:"value"`
	} `json:"usage"`
}

// usageIsolated: B's usage shows nothing of A's, and naming A's tenant id
// is refused exactly like naming one that does not exist.
func usageIsolated(t *testing.T, e *env, a, b *tenant) {
	t.Helper()
	hour := time.Now().UTC().Truncate(time.Hour)
	cell := e.cellClient()
	pos := shipUsage(t, cell, 9, -1, 0, "", "", "", hour, 0)
	shipUsage(t, cell, 9, pos.Position, 1000+int(pos.Position), a.Tenant.ID, topicID(t, e, a.Tenant.ID, "orders"), "bytes_in", hour, 123)
	var out usageAnswer
	if err := b.key.Do(context.Background(), http.MethodGet, "/v1/usage?group_by=topic", nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, u := range out.Usage {
		if u.TenantID != "" || (u.Topic != nil && *u.Topic == "orders") || u.Value == 123 {
			t.Fatalf("B's usage shows A's: %+v", out.Usage)
		}
	}
	sa, ea, _ := e.raw("GET", "/v1/usage?tenant_id="+a.Tenant.ID, basicAuth(b), "", "")
	sm, em, _ := e.raw("GET", "/v1/usage?tenant_id=nope", basicAuth(b), "", "")
	if sa != http.StatusBadRequest || sa != sm || ea != em || strings.Contains(ea.Message, a.Tenant.ID) {
		t.Fatalf("B asks for A's usage: %d %+v; for a missing tenant: %d %+v", sa, ea, sm, em)
	}
}

// TestUsage: a tenant reads its shipped usage by hour, day and topic; an
// operator reads every tenant's; a replayed shipment adds nothing.
func TestUsage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.signup("usage-a"), e.signup("usage-b")
	tid := e.createTopic(a, "orders", 1)
	hour := time.Now().UTC().Truncate(time.Hour)
	cell := e.cellClient()
	if got := shipUsage(t, cell, 1, 0, 1, a.Tenant.ID, tid, "bytes_in", hour, 100); !got.Applied || got.Position != 1 {
		t.Fatalf("first shipment: %+v", got)
	}
	if got := shipUsage(t, cell, 1, 0, 1, a.Tenant.ID, tid, "bytes_in", hour, 100); got.Applied || got.Position != 1 {
		t.Fatalf("replayed shipment: %+v", got)
	}
	shipUsage(t, cell, 1, 1, 2, a.Tenant.ID, tid, "bytes_in", hour.Add(-time.Hour), 20)
	shipUsage(t, cell, 1, 2, 3, b.Tenant.ID, "", "messages_out", hour, 5)

	var out usageAnswer
	if err := a.key.Do(ctx, http.MethodGet, "/v1/usage?group_by=topic&meter=bytes_in", nil, &out); err != nil {
		t.Fatal(err)
	}
	if out.Granularity != "hour" || len(out.Usage) != 2 || out.Usage[0].Value != 20 || out.Usage[1].Value != 100 ||
		*out.Usage[1].Topic != "orders" || *out.Usage[1].TopicID != tid || !out.Usage[1].Start.Equal(hour) {
		t.Fatalf("A's hourly usage: %+v", out)
	}
	out = usageAnswer{}
	if err := a.key.Do(ctx, http.MethodGet, "/v1/usage?granularity=day", nil, &out); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, u := range out.Usage {
		sum += u.Value
		if u.Meter != "bytes_in" || u.Topic != nil {
			t.Fatalf("A's daily usage: %+v", out.Usage)
		}
	}
	if sum != 120 {
		t.Fatalf("A's daily bytes_in %d, want 120", sum)
	}
	out = usageAnswer{}
	if err := e.op.Do(ctx, http.MethodGet, "/v1/admin/usage?granularity=day", nil, &out); err != nil {
		t.Fatal(err)
	}
	tenants := map[string]int64{}
	for _, u := range out.Usage {
		tenants[u.TenantID] += u.Value
	}
	if tenants[a.Tenant.ID] != 120 || tenants[b.Tenant.ID] != 5 {
		t.Fatalf("operator's usage by tenant: %v", tenants)
	}
	if err := e.op.Do(ctx, http.MethodGet, "/v1/admin/usage?tenant_id=nope", nil, &out); !client.IsCode(err, "not_found") {
		t.Fatalf("operator asks for a missing tenant: %v", err)
	}
}

// TestUsageBadInput: each bad query gets a 400 that says what is wrong.
func TestUsageBadInput(t *testing.T) {
	e := newEnv(t)
	a := e.signup("usage-bad")
	now := time.Now().UTC().Truncate(time.Hour)
	for _, tc := range []struct {
		name, query, want string
	}{
		{"inverted range", "from=" + now.Format(time.RFC3339) + "&to=" + now.Add(-2*time.Hour).Format(time.RFC3339), "is not before"},
		{"empty range", "from=" + now.Format(time.RFC3339) + "&to=" + now.Format(time.RFC3339), "is not before"},
		{"huge hourly range", "from=" + now.Add(-90*24*time.Hour).Format(time.RFC3339), "at most 31 days"},
		{"huge daily range", "granularity=day&from=2000-01-01T00:00:00Z", "at most 400 days"},
		{"unknown meter", "meter=bytes_in,storage_parsecs", `unknown meter "storage_parsecs"`},
		{"bad time", "from=yesterday", "not an RFC 3339 time"},
		{"bad granularity", "granularity=minute", "want hour or day"},
		{"bad group_by", "group_by=partition", "want topic"},
		{"another tenant", "tenant_id=" + url.QueryEscape("tn_other"), "caller's own tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ae, _ := e.raw("GET", "/v1/usage?"+tc.query, basicAuth(a), "", "")
			if st != http.StatusBadRequest || ae.Code != "invalid_request" || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("%s: %d %+v, want 400 invalid_request containing %q", tc.query, st, ae, tc.want)
			}
		})
	}
}

func basicAuth(tn *tenant) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(tn.keyID+":"+tn.secret))
}

// TestBillingReconcile: with no Stripe reporting, a closed hour of the
// ledger shows as missing from the outbox; the open hour does not show;
// a bad since is refused.
func TestBillingReconcile(t *testing.T) {
	e := newEnv(t)
	a := e.signup("reconcile-a")
	cell := e.cellClient()
	closed := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	shipUsage(t, cell, 2, 0, 1, a.Tenant.ID, "", "bytes_out", closed, 42)
	shipUsage(t, cell, 2, 1, 2, a.Tenant.ID, "", "bytes_out", time.Now().UTC().Truncate(time.Hour), 9)
	var out struct {
		Items []struct {
			TenantID string    `json:"tenant_id"`
			Meter    string    `json:"meter"`
			Hour     time.Time `json:"hour"`
			Ledger   int64     `json:"ledger"`
			State    string    `json:"state"`
		} `json:"items"`
	}
	if err := e.op.Do(context.Background(), http.MethodGet, "/v1/admin/billing/reconcile", nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || out.Items[0].TenantID != a.Tenant.ID || out.Items[0].Ledger != 42 || out.Items[0].State != "missing" || !out.Items[0].Hour.Equal(closed) {
		t.Fatalf("reconcile: %+v", out.Items)
	}
	_, _, sess := e.operatorKeySession("reconcile")
	st, ae, _ := e.raw("GET", "/v1/admin/billing/reconcile?since=2000-01-01T00:00:00Z", "Bearer "+sess.Token, "", "")
	if st != http.StatusBadRequest || !strings.Contains(ae.Message, "35 days") {
		t.Fatalf("reconcile since 2000: %d %+v", st, ae)
	}
}

type billingAnswer struct {
	Plan  string `json:"plan"`
	Lines []struct {
		Meter  string  `json:"meter"`
		Value  int64   `json:"value"`
		Amount float64 `json:"amount"`
	} `json:"lines"`
	MonthToDate float64 `json:"month_to_date"`
	Projected   float64 `json:"projected"`
}

// billingIsolated: B's estimate counts none of A's usage.
func billingIsolated(t *testing.T, e *env, a, b *tenant) {
	t.Helper()
	cell := e.cellClient()
	pos := shipUsage(t, cell, 10, -1, 0, "", "", "", time.Now(), 0)
	shipUsage(t, cell, 10, pos.Position, 2000+int(pos.Position), a.Tenant.ID, "", "bytes_in", time.Now().UTC().Truncate(time.Hour), 1<<40)
	var out billingAnswer
	if err := b.key.Do(context.Background(), http.MethodGet, "/v1/billing", nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, l := range out.Lines {
		if l.Value != 0 {
			t.Fatalf("B's estimate counts usage: %+v", out)
		}
	}
}

// TestBillingEstimate: a standard tenant's month-to-date charge is its
// usage at the plan's list prices.
func TestBillingEstimate(t *testing.T) {
	e := newEnv(t)
	a := e.signup("estimate-a")
	if _, err := e.db.Exec(context.Background(), `UPDATE tenants SET plan = 'standard' WHERE id = $1`, a.Tenant.ID); err != nil {
		t.Fatal(err)
	}
	cell := e.cellClient()
	shipUsage(t, cell, 3, 0, 1, a.Tenant.ID, "", "bytes_in", time.Now().UTC().Truncate(time.Hour), 20<<30)
	var out billingAnswer
	if err := a.key.Do(context.Background(), http.MethodGet, "/v1/billing", nil, &out); err != nil {
		t.Fatal(err)
	}
	if out.Plan != "standard" || out.MonthToDate != 1.2 || out.Projected < 1.2 {
		t.Fatalf("estimate %+v, want 20 GiB in at $0.06 = $1.20 so far", out)
	}
}
