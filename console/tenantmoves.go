package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/contract/api"
)

// The operator's tenant moves pages: every move of a tenant from its home
// cell to a cell of another pool, one move's partitions as the two cells'
// leaders last reported them, and the cancel button while a move can
// still be rolled back. A move starts from the tenant's page (the "move
// to pool" form there); the control plane decides whether it may.

// tenantMoveCancellable is whether the control plane still rolls a move
// back: before promoting, when no destination partition took writes.
func tenantMoveCancellable(m api.TenantMove) bool {
	return m.State == "mirroring" || m.State == "fencing"
}

// tenantMoveCopying is whether a move's destination still copies from
// the source, so its copy rate can change.
func tenantMoveCopying(m api.TenantMove) bool {
	return m.State == "mirroring" || m.State == "fencing" || m.State == "promoting"
}

// tenantMoveRate says a move's copy rate in words.
func tenantMoveRate(m api.TenantMove) string {
	if m.BytesPerSec == 0 {
		return "the brokers' default for each partition"
	}
	out := humanBytes(m.BytesPerSec) + "/s over all partitions"
	if m.PartitionBytesPerSec > 0 {
		out += ", " + humanBytes(m.PartitionBytesPerSec) + "/s each"
	}
	return out
}

// tenantMovePartitionRate is the rate limit a destination partition's
// puller last reported, empty before a report.
func tenantMovePartitionRate(p api.TenantMovePartition) string {
	switch {
	case p.MirrorBytesPerSec == nil:
		return ""
	case *p.MirrorBytesPerSec == 0:
		return "unlimited"
	}
	return humanBytes(*p.MirrorBytesPerSec) + "/s"
}

// tenantMoveFinished is whether a move reached an end state.
func tenantMoveFinished(m api.TenantMove) bool {
	return m.State == "done" || m.State == "cancelled"
}

// tenantMoveSummary is what the list shows of one move's partitions.
type tenantMoveSummary struct {
	Partitions, Fenced, Promoted int
	// MaxLag is the largest lag a destination leader reported; Reported
	// is whether any did (a lag of 0 is not "not reported").
	MaxLag   int64
	Reported bool
}

func summarizeTenantMove(m api.TenantMove) tenantMoveSummary {
	s := tenantMoveSummary{Partitions: len(m.Partitions)}
	for _, p := range m.Partitions {
		if p.Fenced {
			s.Fenced++
		}
		if p.Promoted {
			s.Promoted++
		}
		if p.Lag != nil && (!s.Reported || *p.Lag > s.MaxLag) {
			s.MaxLag, s.Reported = *p.Lag, true
		}
	}
	return s
}

type tenantMovesData struct {
	InProgress []api.TenantMove
	Recent     []api.TenantMove
	Finished   int
}

func (c *Console) adminTenantMovesPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderTenantMoves(w, r, s, nil)
}

func (c *Console) renderTenantMoves(w http.ResponseWriter, r *http.Request, s *session, ue *uiError) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	moves, err := s.api.AdminTenantMoves(r.Context(), "", "")
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	var d tenantMovesData
	d.InProgress, d.Recent, d.Finished = splitNewestFirst(moves, func(m api.TenantMove) bool { return !tenantMoveFinished(m) })
	p := sessionPage(s, "Tenant moves", "admin-tenant-moves")
	p.Data = d
	c.renderForm(w, r, http.StatusOK, "admin_tenant_moves", p, ue, nil)
}

func (c *Console) adminTenantMovePage(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.operatorTenantMove(w, r, s)
	if !ok {
		return
	}
	c.renderTenantMovePage(w, r, s, id, nil, nil)
}

// renderTenantMovePage renders move id's page, with ue beside the rate
// form when a change was refused.
func (c *Console) renderTenantMovePage(w http.ResponseWriter, r *http.Request, s *session, id int64, ue *uiError, form formInput) {
	m, err := s.api.AdminTenantMove(r.Context(), id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, "Tenant move "+strconv.FormatInt(id, 10), "admin-tenant-moves")
	p.Data = m
	// The notice claims only what the move's state shows.
	switch q := r.URL.Query(); {
	case ue != nil:
	case q.Get("started") == "1" && !tenantMoveFinished(m):
		p.Notice = "Move of tenant " + m.TenantID + " to pool " + m.PoolID + " started."
	case q.Get("cancelled") == "1" && m.State == "cancelled":
		p.Notice = "Move cancelled: the tenant stays on cell " + m.SourceCellID + "."
	case q.Get("rate") == "1" && tenantMoveCopying(m):
		p.Notice = "Copy rate set: " + tenantMoveRate(m) + "."
	}
	c.renderForm(w, r, http.StatusOK, "admin_tenant_move", p, ue, form)
}

func (c *Console) adminMoveTenant(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	form := trimmed(r, "pool", "rate")
	if form["pool"] == "" {
		c.renderAdminTenant(w, r, s, inputError("move-tenant", "choose the pool to move the tenant to"), form)
		return
	}
	rate, ue := moveRate(form["rate"], "move-tenant")
	if ue != nil {
		c.renderAdminTenant(w, r, s, ue, form)
		return
	}
	m, err := s.api.AdminMoveTenant(r.Context(), r.PathValue("id"), api.MoveTenantRequest{Pool: form["pool"], BytesPerSec: rate})
	if err != nil {
		c.formError(w, r, err, "move-tenant", func(ue *uiError) { c.renderAdminTenant(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/tenant-moves/"+strconv.FormatInt(m.ID, 10)+"?started=1")
}

func (c *Console) adminCancelTenantMove(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.operatorTenantMove(w, r, s)
	if !ok {
		return
	}
	if _, err := s.api.AdminCancelTenantMove(r.Context(), id); err != nil {
		c.formError(w, r, err, "tenant-moves", func(ue *uiError) { c.renderTenantMoves(w, r, s, ue) })
		return
	}
	c.redirect(w, r, "/admin/tenant-moves/"+strconv.FormatInt(id, 10)+"?cancelled=1")
}

// adminSetTenantMoveRate changes the copy rate of a move that has not
// switched yet, from its page.
func (c *Console) adminSetTenantMoveRate(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.operatorTenantMove(w, r, s)
	if !ok {
		return
	}
	form := trimmed(r, "rate")
	rate, ue := moveRate(form["rate"], "tenant-move-rate")
	if ue == nil {
		_, err := s.api.AdminUpdateTenantMove(r.Context(), id, api.UpdateTenantMoveRequest{BytesPerSec: &rate})
		if err == nil {
			c.redirect(w, r, "/admin/tenant-moves/"+strconv.FormatInt(id, 10)+"?rate=1")
			return
		}
		c.formError(w, r, err, "tenant-move-rate", func(ue *uiError) { c.renderTenantMovePage(w, r, s, id, ue, form) })
		return
	}
	c.renderTenantMovePage(w, r, s, id, ue, form)
}

// moveRate reads a copy rate field in whole MiB/s: empty or 0 is the
// brokers' default.
func moveRate(v, formID string) (int64, *uiError) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxMoveRateMiB {
		return 0, inputError(formID, fmt.Sprintf("copy rate %q: a whole number of MiB/s from 0 (the brokers' default) to %d", v, maxMoveRateMiB))
	}
	return n << 20, nil
}

// maxMoveRateMiB is the largest copy rate the form takes, 1 TiB/s: a
// bound that keeps the bytes a second an int64, not a limit of the move.
const maxMoveRateMiB = 1 << 20

// operatorTenantMove is the tenant move id of an operator's request; false
// when the caller is no operator or the id is not one (both answered).
func (c *Console) operatorTenantMove(w http.ResponseWriter, r *http.Request, s *session) (int64, bool) {
	if !c.operatorOnly(w, r, s) {
		return 0, false
	}
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
	}
	return id, ok
}
