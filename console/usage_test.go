package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

var usageSeq atomic.Int64

// shipUsage puts one usage record for tenant into the ledger as a cell's
// broker ships it.
func (e *env) shipUsage(tenantName, meter string, hour time.Time, value int64) {
	e.t.Helper()
	ctx := context.Background()
	var tenantID string
	if err := e.db.QueryRow(ctx, `SELECT id FROM tenants WHERE name = $1`, tenantName).Scan(&tenantID); err != nil {
		e.t.Fatal(err)
	}
	ck, err := e.op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		e.t.Fatal(err)
	}
	cell := client.New(e.url, client.WithAPIKey(ck.ID, ck.Secret))
	var pos struct {
		Position int64 `json:"position"`
		Applied  bool  `json:"applied"`
	}
	path := "/internal/v1/cells/" + cptest.Cell + "/usage"
	if err := cell.Do(ctx, http.MethodPost, path, map[string]any{"partition": 1, "from": -1, "next": -1}, &pos); err != nil {
		e.t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"v":1,"node":1,"boot":"console-test","seq":%d,"entries":[{"tenant":%q,"meter":%q,"hour":%d,"value":%d}]}`,
		usageSeq.Add(1), tenantID, meter, hour.Unix(), value)
	body := map[string]any{"partition": 1, "from": pos.Position, "next": pos.Position + 1, "records": []json.RawMessage{json.RawMessage(rec)}}
	if err := cell.Do(ctx, http.MethodPost, path, body, &pos); err != nil || !pos.Applied {
		e.t.Fatalf("ship usage: %+v %v", pos, err)
	}
}

// TestUsagePageAndCSV: the usage page charts the tenant's own metered
// usage by hour and day and offers it as CSV; another tenant's page and
// CSV show none of it.
func TestUsagePageAndCSV(t *testing.T) {
	e := newEnv(t)
	a, b := e.browser(), e.browser()
	a.signup("usage-co")
	b.signup("other-co")
	now := time.Now().UTC().Truncate(time.Hour)
	e.shipUsage("usage-co", "bytes_in", now, 2048)
	e.shipUsage("usage-co", "messages_in", now.Add(-3*time.Hour), 7)

	resp, body := a.get("/usage")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="usage-bytes_in-hour"`, `id="usage-bytes_in-day"`, `data-value="2048"`, `data-value="7"`, "<svg", `href="/usage.csv"`,
		`id="estimate"`, "at the free plan's list prices")
	resp, body = a.get("/usage.csv?granularity=hour")
	wantStatus(t, resp, body, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("csv content type %q", ct)
	}
	wantContains(t, body, "start,meter,topic,topic_id,value\n", now.Format(time.RFC3339)+",bytes_in,,,2048\n", ",messages_in,,,7\n")

	_, body = b.get("/usage")
	wantContains(t, body, "No usage reported yet")
	if strings.Contains(body, "2048") {
		t.Fatal("another tenant's usage page shows the first tenant's bytes")
	}
	_, body = b.get("/usage.csv")
	if body != "start,meter,topic,topic_id,value\n" {
		t.Fatalf("another tenant's csv: %q", body)
	}
}

// TestBrowserUsage: in Chromium, under the console's CSP, the usage page
// draws its SVG charts with one bar for the hour that has usage, and
// another tenant sees the empty state.
func TestBrowserUsage(t *testing.T) {
	e := newEnv(t)
	browser := newBrowser(t)
	alice := newTab(t, browser, e.url)
	alice.signup(e, "alice-usage")
	e.shipUsage("alice-usage", "bytes_out", time.Now().UTC().Truncate(time.Hour), 5000)
	alice.open("/usage", "#usage-bytes_out-hour svg")
	bars := run(alice, "bars with usage", chromedp.Evaluate[int](
		`document.querySelectorAll('#usage-bytes_out-hour rect.bar:not([data-value="0"])').length`))
	if bars != 1 {
		t.Fatalf("the hourly bytes-out chart has %d bars with usage, want 1", bars)
	}
	if got := run(alice, "total", chromedp.Text(chromedp.CSS("#usage-bytes_out-day .total"))); got == "" || got == "0 B" {
		t.Fatalf("30-day total %q", got)
	}
	alice.screenshot("usage-charts")

	bob := newTab(t, browser, e.url)
	bob.signup(e, "bob-usage")
	bob.open("/usage", "#usage-empty")
	if strings.Contains(bob.html(), "usage-bytes_out-hour") {
		t.Fatal("another tenant's usage page draws charts")
	}
}

// TestAdminUsagePage: operators see every tenant's usage by tenant; a
// tenant's session cannot open the page.
func TestAdminUsagePage(t *testing.T) {
	e := newEnv(t)
	a, b := e.browser(), e.browser()
	a.signup("big-co")
	b.signup("small-co")
	now := time.Now().UTC().Truncate(time.Hour)
	e.shipUsage("big-co", "bytes_in", now, 5<<20)
	e.shipUsage("small-co", "bytes_in", now, 1024)
	resp, body := e.opBrowser().get("/admin/usage")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="admin-usage"`, "big-co", "small-co", "5.0 MiB", "1.0 KiB")
	if strings.Index(body, "big-co") > strings.Index(body, "small-co") {
		t.Fatal("the tenant with more bytes in is not first")
	}
	if resp, _ := a.get("/admin/usage"); resp.StatusCode == http.StatusOK {
		t.Fatal("a tenant's session opens the operators' usage page")
	}
}
