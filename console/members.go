package console

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/credential"
)

type membersData struct {
	Members        []api.Member
	Roles          []string
	MinLen, MaxLen int
}

// memberRoles are the roles a person may hold, least powerful first.
var memberRoles = []string{authz.RoleViewer, authz.RoleDeveloper, authz.RoleAdmin, authz.RoleOwner}

func (c *Console) membersPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderMembers(w, r, s, nil, nil)
}

func (c *Console) renderMembers(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	c.renderMembersNotice(w, r, s, ue, form, "")
}

func (c *Console) renderMembersNotice(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput, notice string) {
	ms, err := s.api.Members(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, "Members", "members")
	p.Data = membersData{Members: ms, Roles: memberRoles, MinLen: credential.MinPasswordLen, MaxLen: credential.MaxPasswordLen}
	p.Error, p.Form, p.Notice = ue, form, notice
	status := http.StatusOK
	if ue != nil {
		status = formStatus(ue)
	}
	c.render(w, r, status, "members", p)
}

func (c *Console) addMember(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{"email": strings.TrimSpace(r.PostFormValue("email")), "role": r.PostFormValue("role")}
	req := api.AddMemberRequest{Email: form["email"], Role: form["role"], Password: r.PostFormValue("password")}
	if _, err := s.api.AddMember(r.Context(), req); err != nil {
		c.formError(w, r, err, "add-member", func(ue *uiError) { c.renderMembers(w, r, s, ue, form) })
		return
	}
	// The API answers alike whether or not the address has an account.
	c.renderMembersNotice(w, r, s, nil, nil, "We mailed an invitation to "+req.Email+
		" (or, if it is a member already, the news that it is); it is listed here once accepted.")
}

func (c *Console) changeMemberRole(w http.ResponseWriter, r *http.Request, s *session) {
	if r.PathValue("id") == s.me.UserID {
		c.renderMembers(w, r, s, inputError("member", "you cannot change your own role; another owner or admin can"), nil)
		return
	}
	_, err := s.api.UpdateMember(r.Context(), r.PathValue("id"), api.UpdateMemberRequest{Role: r.PostFormValue("role")})
	c.afterMemberChange(w, r, s, err)
}

func (c *Console) removeMember(w http.ResponseWriter, r *http.Request, s *session) {
	c.afterMemberChange(w, r, s, s.api.RemoveMember(r.Context(), r.PathValue("id")))
}

func (c *Console) afterMemberChange(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if err != nil {
		c.formError(w, r, err, "member", func(ue *uiError) { c.renderMembers(w, r, s, ue, nil) })
		return
	}
	c.redirect(w, r, "/members")
}
