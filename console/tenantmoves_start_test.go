package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// movableCells makes the seeded cell and tmCell cells a tenant move may
// start between, as brokers that take part in tenant moves make them:
// three brokers each, registered with a Raft address and the cell's peer
// CA, reporting that they take part.
func movableCells(e *env) {
	e.t.Helper()
	ctx := context.Background()
	for i := range 3 {
		e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: fmt.Sprintf("%s-b%d", tmCell, i+1), CellID: tmCell, NodeID: i + 1,
			KafkaAddr: fmt.Sprintf("10.0.2.%d:9092", i+1), HTTPAddr: fmt.Sprintf("10.0.2.%d:8090", i+1)}))
	}
	for _, cell := range []string{cptest.Cell, tmCell} {
		k, err := e.op.AdminCreateCellKey(ctx, cell)
		if err != nil {
			e.t.Fatal(err)
		}
		c := client.New(e.url, client.WithAPIKey(k.ID, k.Secret))
		ca := testkit.PeerCAPEM(e.t, cell)
		for i := range 3 {
			b := fmt.Sprintf("%s-b%d", cell, i+1)
			if err := c.Do(ctx, http.MethodPut, "/internal/v1/cells/"+cell+"/brokers/"+b,
				wire.Registration{NodeID: i + 1, RaftAddr: fmt.Sprintf("%s.raft:%d", b, 7000+i), PeerCA: ca}, nil); err != nil {
				e.t.Fatalf("register %s: %v", b, err)
			}
			if err := c.CellReport(ctx, cell, wire.Report{Version: wire.Version, BrokerID: b, Moves: true, HTTPScheme: "https",
				Partitions: []wire.PartitionStatus{}}); err != nil {
				e.t.Fatalf("report of %s: %v", b, err)
			}
		}
	}
}

// Between cells whose brokers take part in tenant moves, the form starts
// a move: the browser lands on its page with its partitions placed on the
// destination, a second move is refused next to the form, and the cancel
// button rolls the move back.
func TestTenantMoveStarts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newTenantMoveSetup(e)
	movableCells(e)
	b := s.op
	page := "/admin/tenants/" + s.tenantID
	b.get(page)
	resp, body := b.post(page+"/move", url.Values{"pool": {tmPool}, "rate": {"2.5"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="move-tenant-error"`, `copy rate &#34;2.5&#34;: a whole number of MiB/s`)
	resp, body = b.post(page+"/move", url.Values{"pool": {" " + tmPool + " "}, "rate": {" 3 "}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	ms, err := e.op.AdminTenantMoves(ctx, "", s.tenantID)
	if err != nil || len(ms) != 1 || ms[0].DestCellID != tmCell || ms[0].State != "mirroring" || ms[0].BytesPerSec != 3<<20 {
		t.Fatalf("the form started %+v (%v)", ms, err)
	}
	id := fmt.Sprint(ms[0].ID)
	if loc := resp.Header.Get("Location"); loc != "/admin/tenant-moves/"+id+"?started=1" {
		t.Fatalf("the form redirects to %q", loc)
	}
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Move of tenant "+s.tenantID+" to pool "+tmPool+" started.", `id="tenant-move-state">mirroring<`,
		`id="tenant-move-partition-`+s.topicID+`-0"`, `id="tenant-move-partition-`+s.topicID+`-1"`, `id="cancel-tenant-move-`+id+`"`)
	wantContains(t, body, `id="tenant-move-rate">Copy rate: 3.0 MiB/s over all partitions, 1.5 MiB/s each.<`, `id="tenant-move-rate-form"`)

	// The move's page changes the rate, and refuses a rate that is not one.
	resp, body = b.post("/admin/tenant-moves/"+id+"/rate", url.Values{"rate": {"-1"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="tenant-move-rate-error"`, `copy rate &#34;-1&#34;`, `value="-1"`)
	resp, body = b.post("/admin/tenant-moves/"+id+"/rate", url.Values{"rate": {"0"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Copy rate set: the brokers&#39; default for each partition.")
	if m, err := e.op.AdminTenantMove(ctx, ms[0].ID); err != nil || m.BytesPerSec != 0 {
		t.Fatalf("after the rate form the move is %+v (%v)", m, err)
	}

	// The tenant's page links the move; the API refuses a second one.
	resp, body = b.get(page)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="tenant-moving"`, `href="/admin/tenant-moves/`+id+`"`)
	resp, body = b.post(page+"/move", url.Values{"pool": {tmPool}})
	wantStatus(t, resp, body, http.StatusConflict)
	wantContains(t, body, `id="move-tenant-error"`, "already has move "+id+" (mirroring); wait for it to finish or cancel it")

	resp, body = b.post("/admin/tenant-moves/"+id+"/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if m, err := e.op.AdminTenantMove(ctx, ms[0].ID); err != nil || m.State != "cancelled" {
		t.Fatalf("after the cancel button the move is %+v (%v)", m, err)
	}
}
