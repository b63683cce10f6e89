package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// tenantMoveSetup is a tenant with a two-partition topic on the seeded
// cell, and a dedicated pool with one empty cell it could move to.
type tenantMoveSetup struct {
	op, dev  *browser
	tenantID string
	ownPool  string
	topicID  string
}

const (
	tmPool = "dedicated-moving-co"
	tmCell = "moving-1"
)

func newTenantMoveSetup(e *env) *tenantMoveSetup {
	e.t.Helper()
	ctx := context.Background()
	s := &tenantMoveSetup{dev: e.browser()}
	s.dev.signup("moving-co")
	resp, body := s.dev.post("/topics", url.Values{"name": {"orders"}, "partitions": {"2"}})
	wantStatus(e.t, resp, body, http.StatusSeeOther)
	if err := e.db.QueryRow(ctx, `SELECT t.tenant_id, t.id, n.pool_id FROM topics t JOIN tenants n ON n.id = t.tenant_id
		WHERE t.name = 'orders'`).Scan(&s.tenantID, &s.topicID, &s.ownPool); err != nil {
		e.t.Fatal(err)
	}
	e.must(e.op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: tmPool, Kind: "dedicated"}))
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: tmCell, PoolID: tmPool}))
	s.op = e.opBrowser()
	return s
}

// insertTenantMove writes a move of s's tenant to tmCell in state with
// what holds it back (see insertTenantMoveOf).
func (s *tenantMoveSetup) insertTenantMove(e *env, state, holdsBack string, lags ...*int64) int64 {
	e.t.Helper()
	return insertTenantMoveOf(e, s.tenantID, s.topicID, tmCell, tmPool, state, holdsBack, lags...)
}

// insertTenantMoveOf writes a tenant move row from the seeded cell to
// cell dest of pool, in state with what holds it back, and one row per
// partition of topic with the given destination lags (nil: not reported;
// a reported one pulls at 3 MiB/s), the first fenced. No broker of the tests reports tenant moves, so the
// API cannot start one; the row stands for one the control plane placed,
// as the tests' operator rows stand for hand-made operators.
func insertTenantMoveOf(e *env, tenant, topic, dest, pool, state, holdsBack string, lags ...*int64) int64 {
	e.t.Helper()
	ctx := context.Background()
	var id int64
	if err := e.db.QueryRow(ctx, `INSERT INTO tenant_moves (tenant_id, source_cell_id, dest_cell_id, dest_pool_id, state, error, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, 'op_test') RETURNING id`, tenant, cptest.Cell, dest, pool, state, holdsBack).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	for part, lag := range lags {
		if _, err := e.db.Exec(ctx, `INSERT INTO tenant_move_partitions (move_id, topic_id, partition, replicas, mirroring, lag, fenced, fenced_end, mirror_at, fenced_at,
				mirror_bytes_per_sec)
			VALUES ($1, $2, $3, '{1,2,3}', true, $4, $5, CASE WHEN $5 THEN 1234 END, now(), CASE WHEN $5 THEN now() END,
				CASE WHEN $4::bigint IS NOT NULL THEN 3145728 END)`,
			id, topic, part, lag, part == 0); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

func lagOf(n int64) *int64 { return &n }

// The move form on the operator's tenant page offers every pool but the
// tenant's own, and each refusal of the control plane is shown next to it
// with its message; the quota form keeps its values.
func TestTenantMoveForm(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newTenantMoveSetup(e)
	b := s.op
	page := "/admin/tenants/" + s.tenantID

	resp, body := b.get(page)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="move-tenant"`, `<option value="`+tmPool+`">`+tmPool+` (dedicated)</option>`, `id="quotas-form"`)
	if strings.Contains(body, `<option value="`+s.ownPool+`"`) {
		t.Fatalf("the move form offers the tenant's own pool %s", s.ownPool)
	}

	for _, tc := range []struct {
		name, pool string
		status     int
		msg        string
	}{
		{"no pool", "", http.StatusUnprocessableEntity, "choose the pool to move the tenant to"},
		{"unknown pool", "nope", http.StatusNotFound, "no such pool &#34;nope&#34;"},
		{"own pool", s.ownPool, http.StatusBadRequest, "is already on pool " + s.ownPool},
		// The seeded cell's brokers have not reported yet.
		{"no live brokers", tmPool, http.StatusServiceUnavailable, "cell " + cptest.Cell + " has 0 live brokers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.post(page+"/move", url.Values{"pool": {tc.pool}})
			wantStatus(t, resp, body, tc.status)
			wantContains(t, body, `id="move-tenant-error"`, tc.msg, `id="q-max_topics"`)
			if m := regexpFields.FindStringSubmatch(body); m == nil || m[2] == "" {
				t.Fatalf("a refused move emptied the quota form: %v", m)
			}
		})
	}
	// Live brokers that do not report tenant moves: the control plane
	// refuses, and the page says which broker.
	e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3")
	resp, body = b.post(page+"/move", url.Values{"pool": {tmPool}})
	wantStatus(t, resp, body, http.StatusServiceUnavailable)
	wantContains(t, body, `id="move-tenant-error"`, "broker cell-1-b1 of cell "+cptest.Cell+" does not report tenant moves",
		`<option value="`+tmPool+`" selected>`)
	// Without the session's token nothing starts.
	resp, body = b.post(page+"/move", url.Values{"pool": {tmPool}, csrfField: {"forged"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if ms, err := e.op.AdminTenantMoves(ctx, "", ""); err != nil || len(ms) != 0 {
		t.Fatalf("refused forms made tenant moves: %+v %v", ms, err)
	}

	resp, body = b.get("/admin/tenant-moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-moves-none"`, `id="tenant-moves-recent-empty"`, `href="/admin/tenant-moves" aria-current="page"`,
		`href="/admin/moves"`)
}

// A move is listed with its cells, pool, what holds it back, its largest
// lag and fenced/promoted counts; its page lists each partition; the
// tenant's page links it instead of the form; cancel rolls it back
// through the API, and a move past fencing has no cancel button and is
// refused with the API's message.
func TestTenantMovePages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newTenantMoveSetup(e)
	b := s.op
	id := s.insertTenantMove(e, "mirroring", "partition 1 of orders: the source leader did not answer", lagOf(42), nil)
	ids := strconv.FormatInt(id, 10)

	resp, body := b.get("/admin/tenant-moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-moves-in-progress"`, `id="tenant-move-`+ids+`"`, `href="/admin/tenant-moves/`+ids+`"`,
		cptest.Cell+" → "+tmCell, "pool "+tmPool, `<span class="badge mirroring">mirroring</span>`,
		`id="tenant-move-`+ids+`-error">partition 1 of orders: the source leader did not answer<`,
		"42 offsets", "1 / 2", "0 / 2", `id="cancel-tenant-move-`+ids+`"`)

	resp, body = b.get("/admin/tenant-moves/" + ids)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-move-state">mirroring<`, `id="tenant-move-partitions"`,
		`id="tenant-move-partition-`+s.topicID+`-0"`, `id="tenant-move-partition-`+s.topicID+`-1"`,
		"orders", "1, 2, 3", "42 offsets", "3.0 MiB/s", "not reported yet", "at offset 1234", "Held back: partition 1 of orders",
		`id="tenant-move-rate">Copy rate: the brokers&#39; default for each partition.<`,
		`id="cancel-tenant-move-`+ids+`"`, `id="tenant-move-refresh"`)

	resp, body = b.get("/admin/tenants/" + s.tenantID)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-moving"`, `href="/admin/tenant-moves/`+ids+`"`)
	if strings.Contains(body, `id="move-tenant"`) {
		t.Fatal("a moving tenant's page still has the move form")
	}

	resp, body = b.post("/admin/tenant-moves/"+ids+"/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if m, err := e.op.AdminTenantMove(ctx, id); err != nil || m.State != "cancelled" {
		t.Fatalf("after the cancel button the move is %+v (%v)", m, err)
	}
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Move cancelled: the tenant stays on cell "+cptest.Cell+".", `id="tenant-move-state">cancelled<`)
	if strings.Contains(body, `id="cancel-tenant-move-`) || strings.Contains(body, `id="tenant-move-refresh"`) {
		t.Fatal("a cancelled move still has a cancel button or a refresh link")
	}
	resp, body = b.get("/admin/tenant-moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-moves-none"`, `id="tenant-moves-recent"`, `<span class="badge cancelled">cancelled</span>`)

	// Past fencing the destination may serve writes: no button, and a
	// forged cancel is the API's to refuse.
	late := strconv.FormatInt(s.insertTenantMove(e, "promoting", "", lagOf(0), lagOf(0)), 10)
	resp, body = b.get("/admin/tenant-moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-move-`+late+`"`, `<span class="badge promoting">promoting</span>`, "0 offsets")
	if strings.Contains(body, `id="cancel-tenant-move-`+late+`"`) {
		t.Fatal("a promoting move has a cancel button")
	}
	for _, tc := range []struct {
		id     string
		status int
		msg    string
	}{
		{late, http.StatusBadRequest, "tenant move " + late + " is promoting: the destination may already serve writes, so it cannot be rolled back"},
		{ids, http.StatusBadRequest, "tenant move " + ids + " is cancelled; only an unfinished move before promoting can be cancelled"},
		{"999999", http.StatusNotFound, "no such tenant move"},
	} {
		resp, body = b.post("/admin/tenant-moves/"+tc.id+"/cancel", url.Values{})
		wantStatus(t, resp, body, tc.status)
		wantContains(t, body, `id="tenant-moves-error"`, tc.msg)
	}
	resp, body = b.get("/admin/tenant-moves/abc")
	wantStatus(t, resp, body, http.StatusNotFound)
	resp, body = b.get("/admin/tenant-moves/999999")
	wantStatus(t, resp, body, http.StatusNotFound)
}

// A tenant's session reaches none of the tenant move pages or forms.
func TestTenantMovesOperatorOnly(t *testing.T) {
	e := newEnv(t)
	s := newTenantMoveSetup(e)
	id := strconv.FormatInt(s.insertTenantMove(e, "mirroring", "", nil, nil), 10)
	dev := s.dev
	for _, path := range []string{"/admin/tenant-moves", "/admin/tenant-moves/" + id} {
		resp, body := dev.get(path)
		wantStatus(t, resp, body, http.StatusForbidden)
		wantContains(t, body, "These pages are for Sluice")
	}
	for _, path := range []string{"/admin/tenants/" + s.tenantID + "/move", "/admin/tenant-moves/" + id + "/cancel"} {
		resp, body := dev.post(path, url.Values{"pool": {tmPool}})
		wantStatus(t, resp, body, http.StatusForbidden)
	}
	if m, err := e.op.AdminTenantMove(context.Background(), mustID(t, id)); err != nil || m.State != "mirroring" {
		t.Fatalf("a tenant's cancel changed the move: %+v %v", m, err)
	}
	if _, body := dev.get("/"); strings.Contains(body, `href="/admin/tenant-moves"`) {
		t.Fatal("a tenant's navigation links the tenant moves")
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
