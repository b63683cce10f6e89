package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// operatorOnly refuses operator pages to tenant sessions before any call;
// the API would refuse them too.
func (c *Console) operatorOnly(w http.ResponseWriter, r *http.Request, s *session) bool {
	if s.me.Operator {
		return true
	}
	c.renderMessage(w, r, s, http.StatusForbidden, "Not allowed", "These pages are for Sluice's platform operators.")
	return false
}

func (c *Console) adminTenantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	operatorList(c, w, r, s, "Tenants", "admin-tenants", "admin_tenants", func(ctx context.Context) ([]api.AdminTenant, error) {
		return s.api.AdminTenants(ctx, "load")
	})
}

// operatorList renders template name, an operator-only page of what list
// answers.
func operatorList[T any](c *Console, w http.ResponseWriter, r *http.Request, s *session, title, nav, name string, list func(context.Context) (T, error)) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	v, err := list(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, title, nav)
	p.Data = v
	c.render(w, r, http.StatusOK, name, p)
}

// quotaField is one editable quota; get and set tie it to api.Quotas.
type quotaField struct {
	Name, Label string
	get         func(*api.Quotas) int64
	set         func(*api.Quotas, int64)
}

var quotaFields = []quotaField{
	{"produce_bytes_per_sec", "Produce bytes per second", func(q *api.Quotas) int64 { return q.ProduceBytesPerSec }, func(q *api.Quotas, v int64) { q.ProduceBytesPerSec = v }},
	{"produce_messages_per_sec", "Produce messages per second", func(q *api.Quotas) int64 { return q.ProduceMessagesPerSec }, func(q *api.Quotas, v int64) { q.ProduceMessagesPerSec = v }},
	{"fetch_bytes_per_sec", "Fetch bytes per second", func(q *api.Quotas) int64 { return q.FetchBytesPerSec }, func(q *api.Quotas, v int64) { q.FetchBytesPerSec = v }},
	{"max_partitions", "Max partitions", func(q *api.Quotas) int64 { return int64(q.MaxPartitions) }, func(q *api.Quotas, v int64) { q.MaxPartitions = int(v) }},
	{"max_topics", "Max topics", func(q *api.Quotas) int64 { return int64(q.MaxTopics) }, func(q *api.Quotas, v int64) { q.MaxTopics = int(v) }},
	{"max_connections", "Max connections", func(q *api.Quotas) int64 { return int64(q.MaxConnections) }, func(q *api.Quotas, v int64) { q.MaxConnections = int(v) }},
	{"max_storage_bytes", "Max storage bytes", func(q *api.Quotas) int64 { return q.MaxStorageBytes }, func(q *api.Quotas, v int64) { q.MaxStorageBytes = v }},
	{"max_message_bytes", "Max message bytes", func(q *api.Quotas) int64 { return int64(q.MaxMessageBytes) }, func(q *api.Quotas, v int64) { q.MaxMessageBytes = int(v) }},
	{"max_requests_per_sec", "Max requests per second", func(q *api.Quotas) int64 { return int64(q.MaxRequestsPerSec) }, func(q *api.Quotas, v int64) { q.MaxRequestsPerSec = int(v) }},
	{"max_retention_ms", "Max retention (ms)", func(q *api.Quotas) int64 { return q.MaxRetentionMs }, func(q *api.Quotas, v int64) { q.MaxRetentionMs = v }},
}

type quotaInput struct{ Name, Label, Value string }

type adminTenantData struct {
	Tenant api.AdminTenant
	Fields []quotaInput
	// Pools is where the move form may send the tenant: every pool but
	// its own. Move is its unfinished move, if any.
	Pools []api.Pool
	Move  *api.TenantMove
}

func (c *Console) adminTenantPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderAdminTenant(w, r, s, nil, nil)
}

func (c *Console) renderAdminTenant(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	id := r.PathValue("id")
	t, err := s.api.AdminTenant(r.Context(), id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	q, err := s.api.AdminQuotas(r.Context(), id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	pools, err := s.api.AdminPools(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	moves, err := s.api.AdminTenantMoves(r.Context(), "", id)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := adminTenantData{Tenant: t}
	for _, x := range pools {
		if x.ID != t.PoolID {
			d.Pools = append(d.Pools, x)
		}
	}
	for i := range moves {
		if !tenantMoveFinished(moves[i]) {
			d.Move = &moves[i]
		}
	}
	// A rejected form refills only its own fields.
	quotaForm := ue == nil || ue.Form == "quotas"
	for _, f := range quotaFields {
		v := strconv.FormatInt(f.get(&q), 10)
		if form != nil && quotaForm {
			v = form[f.Name]
		}
		d.Fields = append(d.Fields, quotaInput{Name: f.Name, Label: f.Label, Value: v})
	}
	p := sessionPage(s, "Quotas of "+t.Name, "admin-tenants")
	p.Data = d
	c.renderEditForm(w, r, "admin_tenant", p, "Quotas saved.", ue, form)
}

func (c *Console) adminSetQuotas(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	id := r.PathValue("id")
	form := formInput{}
	var q api.Quotas
	for _, f := range quotaFields {
		v := strings.TrimSpace(r.PostFormValue(f.Name))
		form[f.Name] = v
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c.renderAdminTenant(w, r, s, &uiError{Status: http.StatusUnprocessableEntity, Code: string(catalog.InvalidRequest.Code),
				Message: f.Label + " must be a whole number", Form: "quotas"}, form)
			return
		}
		f.set(&q, n)
	}
	if _, err := s.api.AdminSetQuotas(r.Context(), id, q); err != nil {
		c.formError(w, r, err, "quotas", func(ue *uiError) { c.renderAdminTenant(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/tenants/"+url.PathEscape(id)+"?saved=1")
}
