package console

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
)

type tenantsData struct {
	Tenants []api.UserTenant
	Others  int // tenants the user may switch to
}

// tenantsPage lists the signed-in user's tenants, to switch between them,
// and holds the New tenant form.
func (c *Console) tenantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderTenants(w, r, s, nil, nil)
}

func (c *Console) renderTenants(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	ts, err := s.api.Tenants(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := tenantsData{Tenants: ts}
	for _, t := range ts {
		if t.ID != s.me.TenantID {
			d.Others++
		}
	}
	p := sessionPage(s, "Your tenants", "tenants")
	p.Data = d
	c.renderForm(w, r, http.StatusOK, "tenants", p, ue, form)
}

// createTenant creates another tenant owned by the signed-in user and
// switches the browser to it, with the session the API answers with. The
// session it replaces is ended.
func (c *Console) createTenant(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{"name": strings.TrimSpace(r.PostFormValue("name")), "plan": r.PostFormValue("plan")}
	res, err := s.api.CreateTenant(r.Context(), api.CreateTenantRequest{Name: form["name"], Plan: form["plan"]})
	if err != nil {
		c.formError(w, r, err, "new-tenant", func(ue *uiError) { c.renderTenants(w, r, s, ue, form) })
		return
	}
	c.log.Info("console tenant created", "tenant_id", res.Tenant.ID)
	c.endReplacedSession(r, s)
	c.setSessionCookie(w, r, res.Session)
	c.redirect(w, r, "/")
}

// switchTenant signs the user in again, to the tenant picked: the API's
// sessions belong to one tenant, and a new one takes the password, as at
// sign-in (and counts against the same sign-in limits). The session it
// replaces is ended.
func (c *Console) switchTenant(w http.ResponseWriter, r *http.Request, s *session) {
	tenant := strings.TrimSpace(r.PostFormValue("tenant"))
	sess, err := c.anonAPI(r).Login(r.Context(), api.SessionRequest{Email: s.me.Email, Password: r.PostFormValue("password"), Tenant: tenant})
	if err != nil {
		c.renderTenants(w, r, s, c.toUIError(r, err, "switch-tenant"), formInput{"tenant": tenant})
		return
	}
	c.endReplacedSession(r, s)
	c.setSessionCookie(w, r, sess)
	c.redirect(w, r, "/")
}

// endReplacedSession ends the session whose cookie is being replaced: the
// browser will not send it again, so nobody should be able to.
func (c *Console) endReplacedSession(r *http.Request, s *session) {
	if err := s.api.Logout(r.Context()); err != nil {
		c.log.Warn("console end a replaced session", "err", err)
	}
}
