package console

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The tenant move form and pages work in a real browser under the CSP,
// through htmx: the form on the tenant's page shows the control plane's
// refusal while the brokers do not report tenant moves and starts the
// move once they do, the nav reaches the tenant moves list, a move's page
// lists its partitions, and its cancel button rolls it back.
func TestBrowserTenantMove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := newTenantMoveSetup(e)
	e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3")
	browser := newBrowser(t)

	op := newTab(t, browser, e.url)
	op.operatorSignIn(e)
	op.do("open the tenant", chromedp.Click(chromedp.CSS(`a[href="/admin/tenants/`+s.tenantID+`"]`)), chromedp.WaitVisible(chromedp.ID("move-tenant")))
	op.do("move it to the dedicated pool",
		chromedp.SetValue(chromedp.ID("move-pool"), tmPool),
		chromedp.Click(chromedp.ID("move-tenant-submit")),
		chromedp.WaitVisible(chromedp.ID("move-tenant-error")),
	)
	op.wantFormError("move-tenant", "broker cell-1-b1 of cell cell-1 does not report tenant moves")
	if v := run(op, "kept pool", chromedp.Value(chromedp.ID("move-pool"))); v != tmPool {
		t.Fatalf("after the refusal the pool select shows %q", v)
	}
	op.screenshot("admin-tenant-move-refused")

	// Once both cells' brokers take part in tenant moves, the same form
	// starts the move and lands on its page.
	movableCells(e)
	op.do("move it again",
		chromedp.SetValue(chromedp.ID("move-pool"), tmPool),
		chromedp.Click(chromedp.ID("move-tenant-submit")),
		chromedp.WaitVisible(chromedp.ID("tenant-move-partitions")),
	)
	ms, err := e.op.AdminTenantMoves(ctx, "mirroring", s.tenantID)
	if err != nil || len(ms) != 1 {
		t.Fatalf("tenant moves after the form: %+v %v", ms, err)
	}
	id := ms[0].ID
	if msg := run(op, "notice", chromedp.Text(chromedp.ID("notice"))); !strings.Contains(msg, "started") {
		t.Fatalf("after starting a move the notice says %q", msg)
	}
	op.do("open tenant moves", chromedp.Click(chromedp.CSS(`nav a[href="/admin/tenant-moves"]`)),
		chromedp.WaitVisible(chromedp.ID(fmt.Sprintf("tenant-move-%d", id))))
	op.do("open the move", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/admin/tenant-moves/%d"]`, id))),
		chromedp.WaitVisible(chromedp.ID("tenant-move-partitions")))
	if rows := run(op, "partition rows", chromedp.Evaluate[int]("document.querySelectorAll('#tenant-move-partitions tbody tr').length")); rows != 2 {
		t.Fatalf("the move's page lists %d partitions, want 2", rows)
	}
	op.screenshot("admin-tenant-move")
	op.do("cancel it",
		chromedp.Click(chromedp.ID(fmt.Sprintf("cancel-tenant-move-%d", id))),
		chromedp.WaitVisible(chromedp.ID("notice")),
	)
	if m, err := e.op.AdminTenantMove(ctx, id); err != nil || m.State != "cancelled" {
		t.Fatalf("after the cancel button the move is %+v %v", m, err)
	}
	if got := run(op, "state", chromedp.Text(chromedp.ID("tenant-move-state"))); got != "cancelled" {
		t.Fatalf("after cancelling the page shows state %q", got)
	}
}
