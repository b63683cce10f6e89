package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
)

const (
	// sessionCookie holds the API's session token, which the console passes
	// on as a bearer token; the console keeps no session state of its own.
	sessionCookie = "sluice_session"
	// preCookie is a random value that keys the CSRF token of the signup and
	// login forms, before there is a session.
	preCookie = "sluice_pre"
	// csrfField and csrfHeader carry the CSRF token: the hidden field of
	// every form, and the header htmx adds to its requests.
	csrfField  = "csrf_token"
	csrfHeader = "X-CSRF-Token"
	// maxFormBytes bounds a form post.
	maxFormBytes = 64 << 10
)

// session is a signed-in caller of one request.
type session struct {
	token string
	api   *client.Client
	me    api.Me
	csrf  string
}

// csrfToken derives the CSRF token of a session token (or, with the "pre:"
// prefix, of a pre-session cookie). Being keyed by the session, a token from
// one session is worthless in another.
func (c *Console) csrfToken(subject string) string {
	m := hmac.New(sha256.New, c.cfg.CSRFKey)
	m.Write([]byte("sluice-console-csrf\x00" + subject))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK checks the request's token (form field, else header) against want
// in constant time.
func csrfOK(r *http.Request, want string) bool {
	got := r.PostFormValue(csrfField)
	if got == "" {
		got = r.Header.Get(csrfHeader)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.cfg.SecureCookies }

func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, s api.Session) {
	maxAge := int(time.Until(s.ExpiresAt).Seconds())
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.Token, Path: "/", Expires: s.ExpiresAt, MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteLaxMode})
}

func (c *Console) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteLaxMode})
}

// preToken returns the CSRF token for the anonymous forms, setting the
// pre-session cookie when the browser has none yet.
func (c *Console) preToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(preCookie); err == nil && len(ck.Value) == 32 {
		return c.csrfToken("pre:" + ck.Value)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: preCookie, Value: v, Path: "/", HttpOnly: true,
		Secure: c.secure(r), SameSite: http.SameSiteLaxMode})
	return c.csrfToken("pre:" + v)
}

// anonPOST guards the signup and login posts with the pre-session token.
func (c *Console) anonPOST(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		ck, err := r.Cookie(preCookie)
		if err != nil || len(ck.Value) != 32 || !csrfOK(r, c.csrfToken("pre:"+ck.Value)) {
			c.csrfRejected(w, r, nil)
			return
		}
		h(w, r, c.csrfToken("pre:"+ck.Value))
	}
}

// authed runs h for a signed-in caller. Without a session it sends the
// browser to the login page; a POST must carry the session's CSRF token.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(sessionCookie)
		if err != nil || ck.Value == "" {
			c.toLogin(w, r, "signin")
			return
		}
		s := &session{token: ck.Value, api: c.api.With(client.WithSession(ck.Value)), csrf: c.csrfToken("session:" + ck.Value)}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !csrfOK(r, s.csrf) {
				c.csrfRejected(w, r, s)
				return
			}
		}
		me, err := s.api.Me(r.Context())
		if err != nil {
			if c.authLost(w, r, err) {
				return
			}
			c.renderAPIError(w, r, nil, err)
			return
		}
		s.me = me
		h(w, r, s)
	}
}

func (c *Console) csrfRejected(w http.ResponseWriter, r *http.Request, s *session) {
	c.log.Warn("console csrf rejected", "path", r.URL.Path)
	c.renderMessage(w, r, s, http.StatusForbidden, "Form expired",
		"This form could not be verified (its security token is missing or out of date), so nothing was changed. Go back, reload the page and try again.")
}

// authLost handles an API answer that the session is no longer valid: the
// cookie is dropped and the browser sent to sign in again. It reports
// whether err was such an answer.
func (c *Console) authLost(w http.ResponseWriter, r *http.Request, err error) bool {
	var e *client.Error
	if !errors.As(err, &e) {
		return false
	}
	switch catalog.Code(e.Code) {
	case catalog.SessionExpired.Code:
		c.clearSessionCookie(w, r)
		c.toLogin(w, r, "expired")
		return true
	case catalog.Unauthenticated.Code:
		c.clearSessionCookie(w, r)
		c.toLogin(w, r, "signin")
		return true
	}
	return false
}

// toLogin redirects to the login page with a reason, returning afterwards
// to the page asked for when it was a GET.
func (c *Console) toLogin(w http.ResponseWriter, r *http.Request, reason string) {
	if reason == "signin" && r.URL.Path == "/" {
		c.redirect(w, r, "/login") // a first visit needs no explanation
		return
	}
	q := url.Values{"reason": {reason}}
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		q.Set("next", r.URL.RequestURI())
	}
	c.redirect(w, r, "/login?"+q.Encode())
}

// redirect answers a form post or a lost session with a redirect. htmx gets
// HX-Redirect, which reloads the whole page at the new address.
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, to string) {
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

var loginReasons = map[string]string{
	"expired":   "Your session has expired. Sign in again to continue.",
	"signin":    "Sign in to continue.",
	"signedout": "You have signed out.",
}
