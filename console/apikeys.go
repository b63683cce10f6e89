package console

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
)

type keysData struct {
	Keys    []api.APIKey
	Created *api.APIKey // the key just created, with its secret: rendered once, never stored
	Roles   []string
}

// keyRoles are the roles a key may be given, least powerful first.
var keyRoles = []string{authz.RoleClient, authz.RoleViewer, authz.RoleDeveloper, authz.RoleAdmin}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderKeys(w, r, s, http.StatusOK, nil, nil, nil)
}

func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, s *session, status int, created *api.APIKey, ue *uiError, form formInput) {
	keys, err := s.api.APIKeys(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	for i := range keys {
		keys[i].Secret = "" // the list never carries one; be sure
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].CreatedAt.After(keys[j].CreatedAt) })
	p := sessionPage(s, "API keys", "keys")
	p.Data = keysData{Keys: keys, Created: created, Roles: keyRoles}
	c.renderForm(w, r, status, "apikeys", p, ue, form)
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{
		"description": strings.TrimSpace(r.PostFormValue("description")),
		"role":        r.PostFormValue("role"),
		"expires":     strings.TrimSpace(r.PostFormValue("expires")),
	}
	req := api.CreateAPIKeyRequest{Description: form["description"], Role: form["role"]}
	if form["expires"] != "" {
		day, err := time.Parse(time.DateOnly, form["expires"])
		if err != nil {
			c.renderKeys(w, r, s, 0, nil, inputError("create-key", "the expiry must be a date, YYYY-MM-DD"), form)
			return
		}
		end := day.Add(24 * time.Hour) // the key works through the whole day, UTC
		req.ExpiresAt = &end
	}
	k, err := s.api.CreateAPIKey(r.Context(), req)
	if err != nil {
		c.formError(w, r, err, "create-key", func(ue *uiError) { c.renderKeys(w, r, s, 0, nil, ue, form) })
		return
	}
	// The secret goes out in this one answer (no-store, no redirect that
	// could replay it) and nowhere else.
	c.renderKeys(w, r, s, http.StatusCreated, &k, nil, nil)
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, s *session) {
	if _, err := s.api.RevokeAPIKey(r.Context(), r.PathValue("id")); err != nil {
		c.formError(w, r, err, "revoke-key", func(ue *uiError) { c.renderKeys(w, r, s, 0, nil, ue, nil) })
		return
	}
	c.redirect(w, r, "/api-keys")
}
