package console

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/credential"
)

type signupData struct{ MinLen, MaxLen int }

func (c *Console) signupPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Sign up", CSRF: c.preToken(w, r), Data: signupData{credential.MinPasswordLen, credential.MaxPasswordLen}}
	c.render(w, r, http.StatusOK, "signup", p)
}

func (c *Console) signup(w http.ResponseWriter, r *http.Request, csrf string) {
	req := api.SignupRequest{
		TenantName: strings.TrimSpace(r.PostFormValue("tenant_name")),
		Email:      strings.TrimSpace(r.PostFormValue("email")),
		Password:   r.PostFormValue("password"),
		Plan:       r.PostFormValue("plan"),
	}
	if _, err := c.anonAPI(r).Signup(r.Context(), req); err != nil {
		ue := c.toUIError(r, err, "signup")
		p := page{Title: "Sign up", CSRF: csrf, Error: ue, Data: signupData{credential.MinPasswordLen, credential.MaxPasswordLen},
			Form: formInput{"tenant_name": req.TenantName, "email": req.Email, "plan": req.Plan}}
		c.render(w, r, formStatus(ue), "signup", p)
		return
	}
	// The API answers every signup alike; the mail says what happened.
	p := page{Title: "Confirm your signup", CSRF: csrf, Notice: "We sent a message to " + req.Email + "."}
	c.render(w, r, http.StatusOK, "signup_confirm", p)
}

// confirmSignupPage asks for the mailed token (prefilled from ?token=).
func (c *Console) confirmSignupPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Confirm your signup", CSRF: c.preToken(w, r), Form: formInput{"token": r.URL.Query().Get("token")}}
	c.render(w, r, http.StatusOK, "signup_confirm", p)
}

// confirmSignup finishes a signup with its token and signs the owner in.
func (c *Console) confirmSignup(w http.ResponseWriter, r *http.Request, csrf string) {
	token := strings.TrimSpace(r.PostFormValue("token"))
	res, err := c.anonAPI(r).ConfirmSignup(r.Context(), token)
	if err != nil {
		ue := c.toUIError(r, err, "confirm-signup")
		p := page{Title: "Confirm your signup", CSRF: csrf, Error: ue, Form: formInput{"token": token}}
		c.render(w, r, formStatus(ue), "signup_confirm", p)
		return
	}
	c.log.Info("console signup", "tenant_id", res.Tenant.ID)
	c.setSessionCookie(w, r, res.Session)
	c.redirect(w, r, "/")
}

type loginData struct {
	Reason, Next string
	Operator     bool // open the operator-key form
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := page{Title: "Sign in", CSRF: c.preToken(w, r),
		Data: loginData{Reason: loginReasons[q.Get("reason")], Next: safeNext(q.Get("next")), Operator: q.Get("as") == "operator"}}
	c.render(w, r, http.StatusOK, "login", p)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request, csrf string) {
	req := api.SessionRequest{
		Email:    strings.TrimSpace(r.PostFormValue("email")),
		Password: r.PostFormValue("password"),
		Tenant:   strings.TrimSpace(r.PostFormValue("tenant")),
	}
	next := safeNext(r.PostFormValue("next"))
	sess, err := c.anonAPI(r).Login(r.Context(), req)
	if err != nil {
		// The API's answer is shown as it is: a wrong password, too many
		// attempts (429, with when to retry), or several tenants to pick.
		c.renderLogin(w, r, csrf, c.toUIError(r, err, "login"), next, formInput{"email": req.Email, "tenant": req.Tenant})
		return
	}
	c.setSessionCookie(w, r, sess)
	if sess.TenantID == "" && next == "/" {
		next = "/admin/tenants" // an operator's session belongs to no tenant
	}
	c.redirect(w, r, next)
}

// operatorLogin signs a platform operator in with an operator API key (the
// one `tenantd dev` prints, or another from POST /v1/admin/api-keys). The
// session the API gives acts as that key and belongs to no tenant.
func (c *Console) operatorLogin(w http.ResponseWriter, r *http.Request, csrf string) {
	next := safeNext(r.PostFormValue("next"))
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	if key == "" {
		c.renderLogin(w, r, csrf, inputError("operator-login", "paste the operator API key as id:secret"), next, nil)
		return
	}
	sess, err := c.anonAPI(r).Login(r.Context(), api.SessionRequest{APIKey: key})
	if err != nil {
		c.renderLogin(w, r, csrf, c.toUIError(r, err, "operator-login"), next, nil)
		return
	}
	c.log.Info("console operator signed in with an api key")
	c.setSessionCookie(w, r, sess)
	if next == "/" {
		next = "/admin/tenants"
	}
	c.redirect(w, r, next)
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, csrf string, ue *uiError, next string, form formInput) {
	p := page{Title: "Sign in", CSRF: csrf, Error: ue, Data: loginData{Next: next, Operator: ue != nil && ue.Form == "operator-login"}, Form: form}
	c.render(w, r, formStatus(ue), "login", p)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := s.api.Logout(r.Context()); err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.clearSessionCookie(w, r)
	c.redirect(w, r, "/login?reason=signedout")
}
