package console

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
)

type aclsData struct {
	ACLs                                                 []api.ACL
	Keys                                                 []api.APIKey
	ResourceTypes, PatternTypes, Operations, Permissions []string
}

func (c *Console) aclsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderACLs(w, r, s, nil, nil)
}

func (c *Console) renderACLs(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	ctx := r.Context()
	acls, err := s.api.ACLs(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	keys, err := s.api.APIKeys(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, "ACLs", "acls")
	p.Data = aclsData{ACLs: acls, Keys: keys, ResourceTypes: authz.ResourceTypes, PatternTypes: authz.PatternTypes,
		Operations: authz.Operations, Permissions: authz.Permissions}
	c.renderForm(w, r, http.StatusOK, "acls", p, ue, form)
}

func (c *Console) createACL(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{}
	for _, k := range []string{"principal", "resource_type", "resource_name", "pattern_type", "operation", "permission"} {
		form[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	req := api.CreateACLRequest{Principal: form["principal"], ResourceType: form["resource_type"], ResourceName: form["resource_name"],
		PatternType: form["pattern_type"], Operation: form["operation"], Permission: form["permission"]}
	if _, err := s.api.CreateACL(r.Context(), req); err != nil {
		c.formError(w, r, err, "create-acl", func(ue *uiError) { c.renderACLs(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/acls")
}

func (c *Console) deleteACL(w http.ResponseWriter, r *http.Request, s *session) {
	if err := s.api.DeleteACL(r.Context(), r.PathValue("id")); err != nil {
		c.formError(w, r, err, "delete-acl", func(ue *uiError) { c.renderACLs(w, r, s, ue, nil) })
		return
	}
	c.redirect(w, r, "/acls")
}
