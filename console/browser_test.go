package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// stepTimeout bounds every browser step after the browser has started.
const stepTimeout = 20 * time.Second

// chromium finds the browser binary, preferring the real one over Debian's
// wrapper script.
func chromium() string {
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts headless Chromium for the test. Without Chromium the
// test fails (it is a real dependency, installed by `make tools`), except
// under -short, which skips browser tests.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped under -short")
	}
	path := chromium()
	if path == "" {
		t.Fatal("Chromium is not installed, and the console's browser tests need it: run `make tools` " +
			"(or `apt-get install -y chromium`), or use -short to skip browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		// Keep Chromium off the network: only loopback resolves.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser and owns it: no timeout here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium at %s: %v", path, err)
	}
	return ctx
}

// tab is one browser tab in its own browser context, so its own cookie
// jar: one user.
type tab struct {
	t   *testing.T
	ctx context.Context
	url string

	// mu guards the field below; the tab's event loop appends to it.
	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, browserCtx context.Context, baseURL string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // creates the tab; owns it
		t.Fatalf("open tab: %v", err)
	}
	p := &tab{t: t, ctx: ctx, url: baseURL}
	// Script errors and blocked content (a CSP violation, say) fail the
	// test: the page would look fine in a screenshot and still be broken.
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.problem("script error: " + ev.ExceptionDetails.Text + exceptionText(ev.ExceptionDetails))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Source == cdplog.EntrySourceSecurity || ev.Entry.Source == cdplog.EntrySourceJavascript ||
				(ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork) {
				p.problem(string(ev.Entry.Source) + ": " + ev.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	p.do("enable the log domain", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
		return err
	}))
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, msg := range p.problems {
			t.Errorf("browser: %s", msg)
		}
	})
	return p
}

func (p *tab) problem(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, msg)
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return ": " + d.Exception.Description
	}
	return ""
}

// do runs steps within stepTimeout.
func (p *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](p *tab, what string, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// createKey creates an API key on the API keys page and returns the id
// and the secret the page shows once.
func (p *tab) createKey(description string) (id, secret string) {
	p.t.Helper()
	p.open("/api-keys", "#create-key")
	p.do("create key",
		chromedp.SendKeys(chromedp.ID("key-description"), description),
		chromedp.Click(chromedp.ID("create-key-submit")),
		chromedp.WaitVisible(chromedp.ID("new-secret")),
	)
	secret = run(p, "secret", chromedp.Text(chromedp.ID("new-secret")))
	return run(p, "key id", chromedp.Text(chromedp.ID("new-key-id"))), secret
}

func (p *tab) open(path string, ready string) {
	p.t.Helper()
	p.do("open "+path, chromedp.Navigate(p.url+path), chromedp.WaitVisible(chromedp.CSS(ready)))
}

func (p *tab) html() string {
	p.t.Helper()
	return run(p, "read page", chromedp.OuterHTML(chromedp.CSS("html")))
}

// screenshot saves the whole page as console-<name>.png in
// $SLUICE_SCREENSHOTS, or else in screenshots/ at the repository root
// (git-ignored), for people to look at.
func (p *tab) screenshot(name string) {
	p.t.Helper()
	png := run(p, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := os.Getenv("SLUICE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// operatorSignIn signs in with the operator key on the login page's
// operator form, as an operator does, and waits for the tenants list.
func (p *tab) operatorSignIn(e *env) {
	p.t.Helper()
	p.open("/login?as=operator", "#operator-key")
	p.do("operator signs in",
		chromedp.SendKeys(chromedp.ID("operator-key"), e.opKey),
		chromedp.Click(chromedp.ID("operator-login-submit")),
		chromedp.WaitVisible(chromedp.ID("admin-tenants")),
	)
}

// wantFormError checks that the refusal shown next to the form named form
// (its element form+"-error") contains want.
func (p *tab) wantFormError(form, want string) {
	p.t.Helper()
	if msg := run(p, form+" error", chromedp.Text(chromedp.ID(form+"-error"))); !strings.Contains(msg, want) {
		p.t.Fatalf("%s refused with %q, want it to say %q", form, msg, want)
	}
}

// signup signs up as a user does: the form, then the token from the mail
// (e's mail directory) pasted into the confirmation form.
func (p *tab) signup(e *env, tenant string) {
	p.t.Helper()
	p.open("/signup", "#signup-form")
	p.do("sign up "+tenant,
		chromedp.SendKeys(chromedp.ID("tenant_name"), tenant),
		chromedp.SendKeys(chromedp.ID("email"), tenant+"@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "password-"+tenant+"-1"),
		chromedp.Click(chromedp.ID("signup-submit")),
		chromedp.WaitVisible(chromedp.ID("confirm-form")),
	)
	p.do("confirm the signup of "+tenant,
		chromedp.SendKeys(chromedp.ID("token"), e.mailToken(tenant+"@example.com")),
		chromedp.Click(chromedp.ID("confirm-submit")),
		chromedp.WaitVisible(chromedp.ID("overview-tenant")),
	)
}

func TestBrowserSignupTopicKeyAndIsolation(t *testing.T) {
	e := newEnv(t)
	browser := newBrowser(t)

	alice := newTab(t, browser, e.url)
	alice.open("/signup", "#signup-form")
	alice.screenshot("signup")
	if !run(alice, "htmx loaded", chromedp.Evaluate[bool]("typeof htmx === 'object'")) {
		t.Fatal("htmx did not load from the embedded assets")
	}
	alice.signup(e, "alice-co")
	if got := run(alice, "tenant name", chromedp.Text(chromedp.ID("overview-tenant"))); got != "alice-co" {
		t.Fatalf("overview shows tenant %q", got)
	}
	if got := run(alice, "bootstrap", chromedp.Text(chromedp.ID("bootstrap"))); got != "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094" {
		t.Fatalf("bootstrap servers %q", got)
	}

	// Create a topic.
	alice.open("/topics", "#create-topic")
	alice.do("create topic",
		chromedp.SendKeys(chromedp.ID("topic-name"), "orders"),
		chromedp.SetValue(chromedp.ID("topic-partitions"), "3"),
		chromedp.SendKeys(chromedp.ID("topic-retention"), "48"),
		chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/topics/orders"]`)),
	)
	alice.screenshot("topics")

	// A bad name is refused by the API, and the page says why next to the
	// form. htmx swaps the answer in: the marker set before the submit
	// survives, so the page was not reloaded.
	alice.do("create bad topic",
		chromedp.Evaluate[chromedp.Void]("window.sluiceMarker = 1"),
		chromedp.SendKeys(chromedp.ID("topic-name"), "bad name!"),
		chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.ID("create-topic-error")),
	)
	if !run(alice, "htmx swap", chromedp.Evaluate[bool]("window.sluiceMarker === 1")) {
		t.Error("the rejected form reloaded the page instead of being swapped in by htmx")
	}
	alice.wantFormError("create-topic", "a topic name has 1 to 249 characters")
	if v := run(alice, "kept input", chromedp.Value(chromedp.ID("topic-name"))); v != "bad name!" {
		t.Fatalf("the rejected form lost its input: %q", v)
	}
	alice.screenshot("topic-error")

	// What the brokers report of a partition shows on the topic's page.
	ctx := context.Background()
	var topicID string
	if err := e.db.QueryRow(ctx, `SELECT id FROM topics WHERE name = 'orders'`).Scan(&topicID); err != nil {
		t.Fatal(err)
	}
	ck, err := e.op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.New(e.url, client.WithAPIKey(ck.ID, ck.Secret)).CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version,
		BrokerID: cptest.Cell + "-b2", Partitions: []wire.PartitionStatus{{TopicID: topicID, Partition: 0, LeaderNode: 2, LeaderEpoch: 1,
			LogStartOffset: 3, LogEndOffset: 42, HighWatermark: 42, SizeBytes: 3 << 20}}}); err != nil {
		t.Fatal(err)
	}
	alice.open("/topics/orders", "#update-topic")
	if row := run(alice, "partition 0", chromedp.Text("#topic-partitions tbody tr")); !strings.Contains(row, "node 2") ||
		!strings.Contains(row, "3 – 42") || !strings.Contains(row, "3.0 MiB") {
		t.Errorf("partition 0's row shows %q, want its reported leader, offsets and size", row)
	}
	alice.screenshot("topic")

	// Create an API key: the secret is shown once.
	keyID, secret := alice.createKey("orders service")
	if secret == "" || keyID == "" {
		t.Fatalf("key %q secret %q", keyID, secret)
	}
	alice.screenshot("api-key-created")
	me, err := client.New(e.url, client.WithAPIKey(keyID, secret)).Me(context.Background())
	if err != nil || me.KeyID != keyID {
		t.Fatalf("the shown secret does not work: %v %+v", err, me)
	}
	alice.do("reload keys", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("keys")), chromedp.WaitNotPresent(chromedp.ID("new-secret")))
	if page := alice.html(); strings.Contains(page, secret) {
		t.Fatal("the secret is shown again after a reload")
	}
	alice.open("/api-keys", "#keys")
	if page := alice.html(); strings.Contains(page, secret) || !strings.Contains(page, keyID) {
		t.Fatal("the key list shows the secret, or lacks the key")
	}
	alice.screenshot("api-keys")

	// The overview now names the key in the client configs.
	alice.open("/", "#cfg-kcat")
	if cfg := run(alice, "kcat config", chromedp.Text(chromedp.ID("cfg-kcat"))); !strings.Contains(cfg, "sasl.username="+keyID) ||
		!strings.Contains(cfg, "<your secret>") || strings.Contains(cfg, secret) {
		t.Fatalf("kcat config:\n%s", cfg)
	}
	alice.screenshot("overview")

	alice.open("/topics", "#topics")
	if page := alice.html(); !strings.Contains(page, `href="/topics/orders"`) {
		t.Fatal("the topic is not listed")
	}
	// The groups page before and after a coordinator reports a group's lag.
	alice.open("/groups", "#groups-empty")
	alice.screenshot("groups-empty")
	var aliceID string
	if err := e.db.QueryRow(context.Background(), `SELECT id FROM tenants WHERE name = 'alice-co'`).Scan(&aliceID); err != nil {
		t.Fatal(err)
	}
	e.reportGroupLag(aliceID, "orders", "order-workers")
	alice.open("/groups", "#groups")
	alice.screenshot("groups")
	alice.do("open the group", chromedp.Click(chromedp.CSS("a.group-link")), chromedp.WaitVisible(chromedp.ID("group-partitions")))
	if got := run(alice, "group title", chromedp.Text(chromedp.ID("group-title"))); got != "order-workers" {
		t.Fatalf("group page title %q", got)
	}
	if rows := run(alice, "partition rows", chromedp.Evaluate[int]("document.querySelectorAll('#group-partitions tbody tr').length")); rows != 3 {
		t.Fatalf("group page shows %d partitions, want 3", rows)
	}
	alice.screenshot("group")

	for _, pg := range []struct{ path, ready, name string }{
		{"/acls", "#create-acl", "acls"},
		{"/usage", "#usage-empty", "usage"},
		{"/members", "#members", "members"},
	} {
		alice.open(pg.path, pg.ready)
		alice.screenshot(pg.name)
	}

	// Another tenant, in its own cookie jar, sees none of it.
	bob := newTab(t, browser, e.url)
	bob.signup(e, "bob-co")
	bob.open("/topics", "#topics-empty")
	if page := bob.html(); strings.Contains(page, "orders") {
		t.Fatal("another tenant's topic is visible")
	}
	bob.open("/topics/orders", "#page-error")
	bob.open("/groups", "#groups-empty")
	bob.open("/groups/order-workers", "#page-error")
	bob.open("/api-keys", "#keys-empty")
	if page := bob.html(); strings.Contains(page, keyID) {
		t.Fatal("another tenant's key is visible")
	}

	// Sign out: the session ends and pages ask to sign in.
	alice.do("sign out", chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-reason")))
	alice.screenshot("login")
	alice.open("/topics", "#login-form")
}

func TestBrowserOperator(t *testing.T) {
	e := newEnv(t)
	browser := newBrowser(t)
	dev := newTab(t, browser, e.url)
	dev.signup(e, "busy-co")
	e.operator("ops@example.com", "operator-password-1")

	op := newTab(t, browser, e.url)
	op.open("/login", "#login-form")
	// Keyboard only: type and press Enter.
	op.do("sign in",
		chromedp.SendKeys(chromedp.ID("email"), "ops@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "operator-password-1"+kb.Enter),
		chromedp.WaitVisible(chromedp.ID("admin-tenants")),
	)
	if page := op.html(); !strings.Contains(page, "busy-co") {
		t.Fatal("the tenant is not listed for the operator")
	}
	op.screenshot("admin-tenants")
	op.open("/admin/cells", ".cell")
	op.screenshot("admin-cells")
	op.do("open quotas", chromedp.Navigate(e.url+"/admin/tenants"), chromedp.Click(chromedp.CSS(`a[href^="/admin/tenants/tn_"]`)),
		chromedp.WaitVisible(chromedp.ID("quotas-form")))
	op.do("edit quota",
		chromedp.SetValue(chromedp.ID("q-max_topics"), "42"),
		chromedp.Click(chromedp.ID("quotas-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	if v := run(op, "saved value", chromedp.Value(chromedp.ID("q-max_topics"))); v != "42" {
		t.Fatalf("max topics shows %q after saving 42", v)
	}
	op.screenshot("admin-quotas")
}

// The fleet forms work in a real browser under the CSP, through htmx: a
// pool and a cell created, a broker added, a move started and cancelled
// with its button, and the control plane's refusal of a drain shown next
// to the drain form.
func TestBrowserFleetAndMoves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	browser := newBrowser(t)
	dev := newTab(t, browser, e.url)
	dev.signup(e, "fleet-co")
	dev.open("/topics", "#create-topic")
	dev.do("create topic",
		chromedp.SendKeys(chromedp.ID("topic-name"), "orders"),
		chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)

	op := newTab(t, browser, e.url)
	op.operatorSignIn(e)
	op.do("open pools", chromedp.Click(chromedp.CSS(`nav a[href="/admin/pools"]`)), chromedp.WaitVisible(chromedp.ID("create-pool")))
	op.do("create a dedicated pool",
		chromedp.SendKeys(chromedp.ID("pool-id"), "dedicated-fleet-co"),
		chromedp.SetValue(chromedp.ID("pool-kind"), "dedicated"),
		chromedp.Click(chromedp.ID("create-pool-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	op.do("open cells", chromedp.Click(chromedp.CSS(`nav a[href="/admin/cells"]`)), chromedp.WaitVisible(chromedp.ID("create-cell")))
	op.do("create a cell",
		chromedp.SendKeys(chromedp.ID("cell-id"), "fleet-1"),
		chromedp.SetValue(chromedp.ID("cell-pool"), "dedicated-fleet-co"),
		chromedp.Click(chromedp.ID("create-cell-submit")),
		chromedp.WaitVisible(chromedp.ID("add-broker")),
	)
	if got := run(op, "cell name", chromedp.Text(chromedp.ID("cell-name"))); got != "fleet-1" {
		t.Fatalf("after creating a cell the page shows %q", got)
	}
	if c, err := e.op.AdminCell(ctx, "fleet-1"); err != nil || c.PoolID != "dedicated-fleet-co" {
		t.Fatalf("the form's cell: %+v %v", c, err)
	}

	// A fourth broker for the seeded cell, then every broker live.
	op.open("/admin/cells/"+cptest.Cell, "#add-broker")
	op.do("add a broker",
		chromedp.SendKeys(chromedp.ID("broker-id"), "cell-1-b4"),
		chromedp.SendKeys(chromedp.ID("broker-node"), "4"),
		chromedp.Click(chromedp.ID("add-broker-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4")
	var topicID string
	var orig []int
	if err := e.db.QueryRow(ctx, `SELECT t.id, p.replicas FROM topics t JOIN partitions p ON p.topic_id = t.id WHERE t.name = 'orders'`).
		Scan(&topicID, &orig); err != nil {
		t.Fatal(err)
	}
	op.do("open moves", chromedp.Click(chromedp.CSS(`nav a[href="/admin/moves"]`)), chromedp.WaitVisible(chromedp.ID("create-move")))
	op.do("start a move",
		chromedp.SendKeys(chromedp.ID("move-topic"), topicID),
		chromedp.SendKeys(chromedp.ID("move-replicas"), fmt.Sprintf("%d, %d, 4", orig[1], orig[2])),
		chromedp.Click(chromedp.ID("create-move-submit")),
		chromedp.WaitVisible(chromedp.ID("moves-in-progress")),
	)
	ms, err := e.op.AdminMoves(ctx, client.MoveFilter{State: "running"})
	if err != nil || len(ms) != 1 {
		t.Fatalf("running moves after the form: %+v %v", ms, err)
	}
	op.screenshot("admin-move-started")
	// The same move again: the API refuses it, next to the form.
	op.do("start it again",
		chromedp.SendKeys(chromedp.ID("move-topic"), topicID),
		chromedp.SendKeys(chromedp.ID("move-replicas"), fmt.Sprintf("%d, %d, 4", orig[1], orig[2])),
		chromedp.Click(chromedp.ID("create-move-submit")),
		chromedp.WaitVisible(chromedp.ID("create-move-error")),
	)
	op.wantFormError("create-move", fmt.Sprintf("already has move %d", ms[0].ID))
	op.do("cancel it",
		chromedp.Click(chromedp.ID(fmt.Sprintf("cancel-move-%d", ms[0].ID))),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	if mv, err := e.op.AdminMove(ctx, ms[0].ID); err != nil || mv.State != "cancelling" {
		t.Fatalf("after the cancel button the move is %+v %v", mv, err)
	}

	// Draining the leaving replica's broker is refused while the
	// cancelling move brings the replica back to it; the page says so
	// next to the drain form.
	leaving := fmt.Sprintf("cell-1-b%d", orig[0])
	op.open("/admin/cells/"+cptest.Cell+"/brokers/"+leaving, "#drain-broker")
	op.do("drain",
		chromedp.SendKeys(chromedp.ID("drain-confirm"), leaving),
		chromedp.Click(chromedp.ID("drain-submit")),
		chromedp.WaitVisible(chromedp.ID("drain-error")),
	)
	op.wantFormError("drain", "unfinished move")
	op.screenshot("admin-drain-refused")
}
