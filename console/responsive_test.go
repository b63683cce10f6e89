package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// overflowJS reports what sticks out of the viewport sideways: "" when the
// page is no wider than the window, else the page width and the outermost
// elements that reach past the window's right edge.
const overflowJS = `(() => {
  const d = document.documentElement;
  if (d.scrollWidth <= window.innerWidth) return "";
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.getBoundingClientRect().right <= window.innerWidth + 0.5) continue;
    let p = el.parentElement, inside = false;
    for (; p && p !== document.body; p = p.parentElement) {
      if (p.getBoundingClientRect().right > window.innerWidth + 0.5) { inside = true; break; }
    }
    if (!inside) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + String(el.className).split(" ").join(".") : "") +
      " to " + Math.round(el.getBoundingClientRect().right) + "px");
  }
  return "page is " + d.scrollWidth + "px wide in a " + window.innerWidth + "px window: " + out.slice(0, 5).join(", ");
})()`

// Every page of the console fits a phone's width (375 px) and a desktop's
// (1280 px) without scrolling sideways: wide tables scroll inside their
// own box and code wraps. Each page is also saved as a screenshot at both
// widths, for people to look at. It includes the operator's pages, reached
// by signing in with the operator key as an operator would.
func TestBrowserEveryPageFits(t *testing.T) {
	e := newEnv(t)
	browser := newBrowser(t)
	ctx := context.Background()

	anon := newTab(t, browser, e.url)
	tenant := newTab(t, browser, e.url)
	tenant.signup(e, "phone-width-co")
	// Long names, as real tenants have, stress the tables.
	const topic = "payments.eu-west-1.settlement-events.v2"
	const group = "settlement-reconciliation-workers-eu-west-1"
	tenant.open("/topics", "#create-topic")
	tenant.do("create topic",
		chromedp.SendKeys(chromedp.ID("topic-name"), topic),
		chromedp.SetValue(chromedp.ID("topic-partitions"), "3"),
		chromedp.Click(chromedp.ID("create-topic-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	if msg := run(tenant, "notice", chromedp.Text(chromedp.ID("notice"))); msg != "Topic "+topic+" created." {
		t.Fatalf("notice after creating a topic: %q", msg)
	}
	tenant.screenshot("topic-created")
	tenant.open("/topics/"+topic, "#topic-partitions")
	if rows := run(tenant, "partition rows", chromedp.Evaluate[int]("document.querySelectorAll('#topic-partitions tbody tr').length")); rows != 3 {
		t.Fatalf("the topic page lists %d partitions, want 3", rows)
	}
	keyID, _ := tenant.createKey("settlement service in eu-west-1")
	tenant.open("/acls", "#create-acl")
	tenant.do("create acl",
		chromedp.SetValue(chromedp.ID("acl-principal"), keyID),
		chromedp.SendKeys(chromedp.ID("acl-resource-name"), topic),
		chromedp.Click(chromedp.ID("create-acl-submit")),
		chromedp.WaitVisible(chromedp.ID("acls")),
	)
	tenant.open("/members", "#add-member")
	tenant.do("add member",
		chromedp.SendKeys(chromedp.ID("member-email"), "a.very.long.name.of.a.developer@settlements.example.com"),
		chromedp.SendKeys(chromedp.ID("member-password"), "developer-password-1"),
		chromedp.Click(chromedp.ID("add-member-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	// The invited developer accepts the mailed invitation; the list has two.
	if _, err := client.New(e.url).AcceptInvitation(ctx, e.mailToken("a.very.long.name.of.a.developer@settlements.example.com")); err != nil {
		t.Fatal(err)
	}
	tenant.open("/members", `#members tbody tr:nth-child(2)`)
	var tenantID string
	if err := e.db.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'phone-width-co'`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	e.reportGroupLag(tenantID, topic, group)
	// A second tenant of the same user, with a long name, so the tenants
	// page has a table and a switch form to fit.
	sess, err := client.New(e.url).Login(ctx, api.SessionRequest{Email: "phone-width-co@example.com", Password: "password-phone-width-co-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(e.url, client.WithSession(sess.Token)).CreateTenant(ctx,
		api.CreateTenantRequest{Name: "phone-width-co-settlements-eu-west-1"}); err != nil {
		t.Fatal(err)
	}

	op := newTab(t, browser, e.url)
	op.operatorSignIn(e)
	if page := op.html(); !strings.Contains(page, "phone-width-co") {
		t.Fatal("the operator does not see the tenant")
	}
	// The fleet pages with long ids, a dedicated pool, a fourth broker
	// and moves: one in progress with its progress reported, one
	// cancelled.
	e.must(e.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "dedicated-settlements-eu-west-1", Kind: "dedicated",
		Description: "phone-width-co's settlement traffic, isolated from the shared cells"}))
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "dedicated-settlements-eu-west-1-a", PoolID: "dedicated-settlements-eu-west-1"}))
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b4-replacement-eu-west-1c", CellID: cptest.Cell, NodeID: 4,
		KafkaAddr: "broker-4.cell-1.sluice.internal.example.com:9092", HTTPAddr: "broker-4.cell-1.sluice.internal.example.com:8081",
		RaftAddr: "broker-4.cell-1.sluice.internal.example.com:7000"}))
	cell := e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4-replacement-eu-west-1c")
	var topicID string
	if err := e.db.QueryRow(ctx, `SELECT id FROM topics WHERE name = $1`, topic).Scan(&topicID); err != nil {
		t.Fatal(err)
	}
	var moves []api.Move
	for part := 0; part < 2; part++ {
		var orig []int
		if err := e.db.QueryRow(ctx, `SELECT replicas FROM partitions WHERE topic_id = $1 AND partition = $2`, topicID, part).Scan(&orig); err != nil {
			t.Fatal(err)
		}
		mv, err := e.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: topicID, Partition: part, Replicas: []int{orig[1], orig[2], 4}})
		if err != nil {
			t.Fatal(err)
		}
		moves = append(moves, mv)
	}
	report := func(mv api.Move, voters, nonvoters []int, joining ...wire.JoinStatus) {
		t.Helper()
		if err := cell.CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: fmt.Sprintf("cell-1-b%d", mv.Original[0]),
			Partitions: []wire.PartitionStatus{{TopicID: topicID, Partition: mv.Partition, LeaderNode: mv.Original[0], LeaderEpoch: 2,
				Voters: voters, Nonvoters: nonvoters, Joining: joining}}}); err != nil {
			t.Fatal(err)
		}
	}
	report(moves[0], moves[0].Original, []int{4}, wire.JoinStatus{Node: 4, BytesBehind: 3 << 30, EntriesBehind: 90_000})
	e.clock.Advance(10 * time.Second)
	report(moves[0], moves[0].Original, []int{4}, wire.JoinStatus{Node: 4, BytesBehind: 2 << 30, EntriesBehind: 60_000})
	e.must(e.op.AdminCancelMove(ctx, moves[1].ID))
	report(moves[1], moves[1].Original, nil)
	// The brokers' reports above replaced broker 1's report of the group.
	e.reportGroupLag(tenantID, topic, group)
	// A tenant move of the first tenant to the dedicated pool, held back
	// with a long message; the second tenant's page keeps the move form.
	tenantMove := strconv.FormatInt(insertTenantMoveOf(e, tenantID, topicID, "dedicated-settlements-eu-west-1-a", "dedicated-settlements-eu-west-1",
		"mirroring", "partition 2 of "+topic+": the destination leader could not reach the source cell's brokers over the mirror lane",
		lagOf(1_234_567_890), lagOf(17), nil), 10)
	var otherTenant string
	if err := e.db.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'phone-width-co-settlements-eu-west-1'`).Scan(&otherTenant); err != nil {
		t.Fatal(err)
	}

	pages := []struct {
		tab               *tab
		path, ready, name string
	}{
		{anon, "/signup", "#signup-form", "signup"},
		{anon, "/login", "#login-form", "login"},
		{anon, "/login?as=operator", "#operator-key", "login-operator"},
		{tenant, "/", "#cfg-java", "overview"},
		{tenant, "/topics", "#topics", "topics"},
		{tenant, "/topics/" + topic, "#topic-partitions", "topic"},
		{tenant, "/topics/" + topic + "/messages", "#browse", "messages"},
		{tenant, "/api-keys", "#keys", "api-keys"},
		{tenant, "/acls", "#acls", "acls"},
		{tenant, "/groups", "#groups", "groups"},
		{tenant, "/groups/" + group, "#group-partitions", "group"},
		{tenant, "/usage", "#quotas", "usage"},
		{tenant, "/members", "#members", "members"},
		{tenant, "/tenants", "#new-tenant", "tenants"},
		{op, "/admin/tenants", "#admin-tenants", "admin-tenants"},
		{op, "/admin/tenants/" + tenantID, "#quotas-form", "admin-tenant"},
		{op, "/admin/pools", "#pools", "admin-pools"},
		{op, "/admin/cells", ".cell", "admin-cells"},
		{op, "/admin/cells/" + cptest.Cell, "#brokers", "admin-cell"},
		{op, "/admin/cells/" + cptest.Cell + "/brokers/cell-1-b1", "#drain-broker", "admin-broker"},
		{op, "/admin/moves", "#moves-in-progress", "admin-moves"},
		{op, "/admin/tenants/" + otherTenant, "#move-tenant", "admin-tenant-move-form"},
		{op, "/admin/tenant-moves", "#tenant-moves-in-progress", "admin-tenant-moves"},
		{op, "/admin/tenant-moves/" + tenantMove, "#tenant-move-partitions", "admin-tenant-move"},
	}
	for _, width := range []int64{375, 1280} {
		for _, tb := range []*tab{anon, tenant, op} {
			tb.do(fmt.Sprintf("set a %d px viewport", width), chromedp.EmulateViewport(width, 900))
		}
		for _, pg := range pages {
			name := fmt.Sprintf("%s-%d", pg.name, width)
			t.Run(name, func(t *testing.T) {
				pg.tab.open(pg.path, pg.ready)
				if got := run(pg.tab, "window width", chromedp.Evaluate[int64]("window.innerWidth")); got != width {
					t.Fatalf("window is %d px wide, want %d", got, width)
				}
				if msg := run(pg.tab, "measure overflow", chromedp.Evaluate[string](overflowJS)); msg != "" {
					t.Errorf("%s at %d px: %s", pg.path, width, msg)
				}
				pg.tab.screenshot(name)
			})
		}
	}
}
