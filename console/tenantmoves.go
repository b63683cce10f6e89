package console

import (
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
	for i := len(moves) - 1; i >= 0; i-- { // newest first
		m := moves[i]
		if !tenantMoveFinished(m) {
			d.InProgress = append(d.InProgress, m)
			continue
		}
		d.Finished++
		if len(d.Recent) < recentMoves {
			d.Recent = append(d.Recent, m)
		}
	}
	p := sessionPage(s, "Tenant moves", "admin-tenant-moves")
	p.Data = d
	c.renderForm(w, r, http.StatusOK, "admin_tenant_moves", p, ue, nil)
}

func (c *Console) adminTenantMovePage(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	id, ok := tenantMoveID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	m, err := s.api.AdminTenantMove(r.Context(), id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, "Tenant move "+strconv.FormatInt(id, 10), "admin-tenant-moves")
	p.Data = m
	// The notice claims only what the move's state shows.
	switch q := r.URL.Query(); {
	case q.Get("started") == "1" && !tenantMoveFinished(m):
		p.Notice = "Move of tenant " + m.TenantID + " to pool " + m.PoolID + " started."
	case q.Get("cancelled") == "1" && m.State == "cancelled":
		p.Notice = "Move cancelled: the tenant stays on cell " + m.SourceCellID + "."
	}
	c.render(w, r, http.StatusOK, "admin_tenant_move", p)
}

func (c *Console) adminMoveTenant(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	form := trimmed(r, "pool")
	if form["pool"] == "" {
		c.renderAdminTenant(w, r, s, inputError("move-tenant", "choose the pool to move the tenant to"), form)
		return
	}
	m, err := s.api.AdminMoveTenant(r.Context(), r.PathValue("id"), form["pool"])
	if err != nil {
		c.formError(w, r, err, "move-tenant", func(ue *uiError) { c.renderAdminTenant(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/tenant-moves/"+strconv.FormatInt(m.ID, 10)+"?started=1")
}

func (c *Console) adminCancelTenantMove(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	id, ok := tenantMoveID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	if _, err := s.api.AdminCancelTenantMove(r.Context(), id); err != nil {
		c.formError(w, r, err, "tenant-moves", func(ue *uiError) { c.renderTenantMoves(w, r, s, ue) })
		return
	}
	c.redirect(w, r, "/admin/tenant-moves/"+strconv.FormatInt(id, 10)+"?cancelled=1")
}

func tenantMoveID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// tenantMoveTable is what the "tenantmovetable" template draws: a table
// of tenant moves with id ID, and the CSRF token its cancel forms carry.
type tenantMoveTable struct {
	ID    string
	Moves []api.TenantMove
	CSRF  string
}

func newTenantMoveTable(id string, moves []api.TenantMove, csrf string) tenantMoveTable {
	return tenantMoveTable{ID: id, Moves: moves, CSRF: csrf}
}
