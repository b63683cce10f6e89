package console

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// A signed-in user creates a second tenant from the header's New tenant
// link, lands in it, and switches back and forth between the two.
func TestBrowserNewTenantAndSwitch(t *testing.T) {
	e := newEnv(t)
	browser := newBrowser(t)
	ctx := context.Background()

	u := newTab(t, browser, e.url)
	u.signup(e, "first-co")
	u.do("open the new tenant form from the header",
		chromedp.Click(chromedp.ID("new-tenant-link")),
		chromedp.WaitVisible(chromedp.ID("new-tenant")),
	)
	if n := run(u, "tenant rows", chromedp.Evaluate[int]("document.querySelectorAll('#tenants tbody tr').length")); n != 1 {
		t.Fatalf("the tenants page lists %d tenants, want 1", n)
	}
	if run(u, "switch form", chromedp.Evaluate[bool]("document.getElementById('switch-tenant') !== null")) {
		t.Fatal("a switch form with nothing to switch to")
	}

	// A taken name is refused next to the form.
	u.do("create a tenant with a taken name",
		chromedp.SendKeys(chromedp.ID("new-tenant-name"), "first-co"),
		chromedp.Click(chromedp.ID("new-tenant-submit")),
		chromedp.WaitVisible(chromedp.ID("new-tenant-error")),
	)
	u.wantFormError("new-tenant", "already_exists")

	u.do("create the second tenant",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("new-tenant-name").value = ""`),
		chromedp.SendKeys(chromedp.ID("new-tenant-name"), "second-co"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("new-tenant-plan").value = "standard"`),
		chromedp.Click(chromedp.ID("new-tenant-submit")),
		chromedp.WaitVisible(chromedp.ID("overview-tenant")),
	)
	if got := run(u, "tenant shown", chromedp.Text(chromedp.ID("overview-tenant"))); got != "second-co" {
		t.Fatalf("after the create the overview shows %q, want second-co", got)
	}
	if got := run(u, "header tenant", chromedp.Text(chromedp.ID("tenant-name"))); got != "second-co" {
		t.Fatalf("the header shows %q", got)
	}
	u.screenshot("tenant-created")

	// The user owns both; the plan was taken.
	s, err := client.New(e.url).Login(ctx, api.SessionRequest{Email: "first-co@example.com", Password: "password-first-co-1", Tenant: "second-co"})
	if err != nil || s.Role != "owner" {
		t.Fatalf("sign in to second-co: %+v %v", s, err)
	}
	if tn, err := client.New(e.url, client.WithSession(s.Token)).Tenant(ctx); err != nil || tn.Plan != "standard" {
		t.Fatalf("second-co: %+v %v", tn, err)
	}

	// Switch back to the first from the header's tenant name.
	u.do("open the switcher",
		chromedp.Click(chromedp.ID("tenant-switch")),
		chromedp.WaitVisible(chromedp.ID("switch-tenant")),
	)
	if got := run(u, "current", chromedp.Evaluate[string]("document.getElementById('current-tenant').closest('td').firstChild.textContent.trim()")); got != "second-co" {
		t.Fatalf("current tenant marked: %q", got)
	}
	// switchTo submits the switcher for first-co with password and waits
	// for the element that answer shows.
	switchTo := func(step, password, shows string) {
		u.do(step,
			chromedp.Evaluate[chromedp.Void](`document.getElementById("switch-tenant-name").value = "first-co"`),
			chromedp.SendKeys(chromedp.ID("switch-password"), password),
			chromedp.Click(chromedp.ID("switch-tenant-submit")),
			chromedp.WaitVisible(chromedp.ID(shows)),
		)
	}
	switchTo("switch with a wrong password", "not my password 1", "switch-tenant-error")
	if got := run(u, "header tenant", chromedp.Text(chromedp.ID("tenant-name"))); got != "second-co" {
		t.Fatalf("a failed switch moved the header to %q", got)
	}
	switchTo("switch to first-co", "password-first-co-1", "overview-tenant")
	if got := run(u, "tenant shown", chromedp.Text(chromedp.ID("overview-tenant"))); got != "first-co" {
		t.Fatalf("after the switch the overview shows %q, want first-co", got)
	}
	// The sessions the browser left behind were ended: what remains is the
	// browser's on first-co and this test's own on second-co.
	rows, err := e.db.Query(ctx, `SELECT t.name FROM sessions s JOIN users u ON u.id = s.user_id
		JOIN tenants t ON t.id = s.tenant_id WHERE u.email = 'first-co@example.com' ORDER BY t.name`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(names, ",") != "first-co,second-co" {
		t.Fatalf("sessions left: %v %v", names, err)
	}
}
