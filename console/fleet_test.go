package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// opBrowser is a browser signed in with the operator key, as an operator
// signs in from the login page.
func (e *env) opBrowser() *browser {
	e.t.Helper()
	b := e.browser()
	b.get("/login?as=operator")
	resp, body := b.post("/login/operator", url.Values{"api_key": {e.opKey}})
	wantStatus(e.t, resp, body, http.StatusSeeOther)
	b.get("/admin/tenants") // the session's CSRF token
	return b
}

// heartbeat has each of the seeded cell's brokers (and any other named)
// report once, holding nothing, as live brokers do: a move needs three
// live brokers that report their replicas' Raft configuration.
func (e *env) heartbeat(brokers ...string) *client.Client {
	e.t.Helper()
	ctx := context.Background()
	ck, err := e.op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		e.t.Fatal(err)
	}
	cell := client.New(e.url, client.WithAPIKey(ck.ID, ck.Secret))
	for _, b := range brokers {
		if err := cell.CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: b, Partitions: []wire.PartitionStatus{}}); err != nil {
			e.t.Fatalf("report of %s: %v", b, err)
		}
	}
	return cell
}

// follow GETs where a form's redirect points.
func (b *browser) follow(resp *http.Response) (*http.Response, string) {
	b.t.Helper()
	loc := resp.Header.Get("Location")
	if loc == "" {
		b.t.Fatalf("%s %s answered %d without a Location", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode)
	}
	return b.get(loc)
}

// An operator creates a shared and a dedicated pool, a cell in the
// dedicated pool and a broker in it through the forms, and each bad input
// is refused next to its form with the API's own message.
func TestFleetForms(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.opBrowser()

	resp, body := b.get("/admin/pools")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="pools"`, "<code>"+cptest.Pool+"</code>", `href="/admin/pools" aria-current="page"`, `href="/admin/moves"`)

	resp, body = b.post("/admin/pools", url.Values{"id": {"tenant-big"}, "kind": {"dedicated"}, "description": {"for big-co alone"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Pool tenant-big created.", "for big-co alone")
	pools, err := e.op.AdminPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 || pools[1].ID != "tenant-big" || pools[1].Kind != "dedicated" {
		t.Fatalf("pools after the form: %+v", pools)
	}
	resp, body = b.post("/admin/pools", url.Values{"id": {"shared-2"}, "kind": {"shared"}})
	wantStatus(t, resp, body, http.StatusSeeOther)

	for _, tc := range []struct {
		name, path string
		form       url.Values
		status     int
		errID      string
		msg        string
	}{
		{"pool kind", "/admin/pools", url.Values{"id": {"odd"}, "kind": {"huge"}}, http.StatusBadRequest, "create-pool", `kind must be &#34;shared&#34; or &#34;dedicated&#34;`},
		{"pool taken", "/admin/pools", url.Values{"id": {"tenant-big"}, "kind": {"shared"}}, http.StatusConflict, "create-pool", "a pool with that id already exists"},
		{"cell pool", "/admin/cells", url.Values{"id": {"cell-x"}, "pool_id": {"nope"}}, http.StatusNotFound, "create-cell", "no such pool"},
		{"cell taken", "/admin/cells", url.Values{"id": {cptest.Cell}, "pool_id": {"tenant-big"}}, http.StatusConflict, "create-cell", "a cell with that id already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.post(tc.path, tc.form)
			wantStatus(t, resp, body, tc.status)
			wantContains(t, body, `id="`+tc.errID+`-error"`, tc.msg)
			// What was typed is kept.
			wantContains(t, body, `value="`+tc.form.Get("id")+`"`)
		})
	}

	resp, body = b.post("/admin/cells", url.Values{"id": {"big-1"}, "pool_id": {"tenant-big"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/admin/cells/big-1?created=1" {
		t.Fatalf("creating a cell redirects to %q", loc)
	}
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Cell big-1 created.", "No brokers in this cell yet.", `id="add-broker"`)

	// The cells page lists each pool's cells with their broker counts.
	resp, body = b.get("/admin/cells")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="pool-tenant-big"`, `href="/admin/cells/big-1"`, `id="pool-shared-2"`, "No cells in this pool yet.")
	i, j := strings.Index(body, `id="pool-`+cptest.Pool+`"`), strings.Index(body, `id="pool-tenant-big"`)
	if i < 0 || j < 0 || !strings.Contains(body[i:j], `href="/admin/cells/`+cptest.Cell+`"`) || !strings.Contains(body[i:j], "<td>3</td>") {
		t.Fatalf("the seeded cell and its 3 brokers are not under its pool:\n%s", body)
	}

	// Brokers: a bad node id, one the API refuses, then one it takes.
	resp, body = b.post("/admin/cells/big-1/brokers", url.Values{"id": {"big-1-b1"}, "node_id": {"one"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="add-broker-error"`, "node id must be a whole number", `value="big-1-b1"`)
	resp, body = b.post("/admin/cells/big-1/brokers", url.Values{"id": {"big-1-b1"}, "node_id": {"0"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantContains(t, body, `id="add-broker-error"`, "node_id must be from 1 to 1048576")
	resp, body = b.post("/admin/cells/big-1/brokers", url.Values{"id": {"big-1-b1"}, "node_id": {"1"},
		"kafka_addr": {"10.0.4.1:9092"}, "http_addr": {"10.0.4.1:8081"}, "raft_addr": {"10.0.4.1:7000"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Broker big-1-b1 added.", "10.0.4.1:9092", "10.0.4.1:8081", "10.0.4.1:7000",
		`href="/admin/cells/big-1/brokers/big-1-b1"`)
	cell, err := e.op.AdminCell(ctx, "big-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cell.Brokers) != 1 || cell.Brokers[0].NodeID != 1 || cell.Brokers[0].RaftAddr != "10.0.4.1:7000" {
		t.Fatalf("cell after adding a broker: %+v", cell)
	}

	// The seeded cell's brokers, as the cells page used to list them.
	resp, body = b.get("/admin/cells/" + cptest.Cell)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="brokers"`, "cell-1-b1", "127.0.0.1:19092", `<span class="badge active">active</span>`, "never")
	resp, body = b.get("/admin/cells/" + cptest.Cell + "/brokers/big-1-b1")
	wantStatus(t, resp, body, http.StatusNotFound)
	resp, body = b.get("/admin/cells/nope")
	wantStatus(t, resp, body, http.StatusNotFound)

	// A tenant session gets none of it.
	dev := e.browser()
	dev.signup("fleet-dev-co")
	for _, p := range []string{"/admin/pools", "/admin/cells/" + cptest.Cell, "/admin/cells/" + cptest.Cell + "/brokers/cell-1-b1", "/admin/moves"} {
		resp, body = dev.get(p)
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	resp, body = dev.post("/admin/pools", url.Values{"id": {"mine"}, "kind": {"dedicated"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if pools, _ := e.op.AdminPools(ctx); len(pools) != 3 {
		t.Fatalf("a tenant's post changed the pools: %+v", pools)
	}
}

// Draining a broker of a cell with no spare broker is refused with the
// API's message, and so is removing a broker that holds replicas; a
// broker holding nothing is removed. Every form needs the broker's id
// typed and the session's CSRF token.
func TestBrokerDrainAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dev := e.browser()
	dev.signup("drain-co")
	resp, body := dev.post("/topics", url.Values{"name": {"orders"}, "partitions": {"2"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	b := e.opBrowser()
	broker := "/admin/cells/" + cptest.Cell + "/brokers/cell-1-b1"

	resp, body = b.get(broker)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="drain-broker"`, `id="delete-broker"`, `id="broker-moves-empty"`)

	resp, body = b.post(broker+"/drain", url.Values{"confirm": {"cell-1-b2"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="drain-error"`, "type the broker&#39;s id exactly to drain it")
	resp, body = b.post(broker+"/drain", url.Values{"confirm": {"cell-1-b1"}, csrfField: {"forged"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	wantContains(t, body, "Form expired")

	// No broker has reported: the cell has no live brokers.
	resp, body = b.post(broker+"/drain", url.Values{"confirm": {"cell-1-b1"}})
	wantStatus(t, resp, body, http.StatusServiceUnavailable)
	wantContains(t, body, `id="drain-error"`, "cell cell-1 has 0 live brokers", "not_enough_replicas")

	// Live, but no fourth broker to take the partitions.
	e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3")
	resp, body = b.post(broker+"/drain", url.Values{"confirm": {" cell-1-b1 "}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantContains(t, body, `id="drain-error"`, "no active broker of cell cell-1 other than cell-1-b1 can take partition",
		"add a broker to the cell first")
	if cell, err := e.op.AdminCell(ctx, cptest.Cell); err != nil || cell.Brokers[0].Status != "active" {
		t.Fatalf("a refused drain changed the broker: %+v %v", cell.Brokers, err)
	}
	if ms, err := e.op.AdminMoves(ctx, client.MoveFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("a refused drain made moves: %+v %v", ms, err)
	}

	resp, body = b.post(broker+"/delete", url.Values{"confirm": {"cell-1-b1"}})
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantContains(t, body, `id="delete-broker-error"`, "partition replicas; move them first")

	// A fifth broker holds nothing and is not one of the lowest node ids.
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-1-b5", CellID: cptest.Cell, NodeID: 5}))
	resp, body = b.post("/admin/cells/"+cptest.Cell+"/brokers/cell-1-b5/delete", url.Values{"confirm": {"cell-1-b5"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Broker removed.")
	if strings.Contains(body, "cell-1-b5") {
		t.Fatalf("the removed broker is still listed:\n%s", body)
	}
}
