package console

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane"
)

func TestSessionCookieFlags(t *testing.T) {
	for _, tc := range []struct {
		name          string
		secureCookies bool
		tls           bool
		wantSecure    bool
	}{
		{name: "plain http", wantSecure: false},
		{name: "SecureCookies behind a proxy", secureCookies: true, wantSecure: true},
		{name: "tls request", tls: true, wantSecure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{console: func(c *Config) { c.SecureCookies = tc.secureCookies }})
			// Drive the handler directly so the request can claim TLS.
			serve := func(req *http.Request) *http.Response {
				if tc.tls {
					req.TLS = &tls.ConnectionState{}
				}
				rec := httptest.NewRecorder()
				e.console.ServeHTTP(rec, req)
				return rec.Result()
			}
			page := serve(httptest.NewRequest(http.MethodGet, "/signup", nil))
			var pre *http.Cookie
			for _, c := range page.Cookies() {
				if c.Name == preCookie {
					pre = c
				}
			}
			if pre == nil || !pre.HttpOnly || pre.SameSite != http.SameSiteLaxMode || pre.Secure != tc.wantSecure {
				t.Fatalf("pre-session cookie %+v", pre)
			}
			form := url.Values{"tenant_name": {"cookie-test"}, "email": {"cookie@example.com"},
				"password": {"password-cookie-1"}, csrfField: {e.console.csrfToken("pre:" + pre.Value)}}
			req := httptest.NewRequest(http.MethodPost, "/signup", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(pre)
			if resp := serve(req); resp.StatusCode != http.StatusOK {
				t.Fatalf("signup: status %d", resp.StatusCode)
			}
			form = url.Values{"token": {e.mailToken("cookie@example.com")}, csrfField: {e.console.csrfToken("pre:" + pre.Value)}}
			req = httptest.NewRequest(http.MethodPost, "/signup/confirm", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(pre)
			before := e.clock.Now()
			resp := serve(req)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("confirm signup: status %d", resp.StatusCode)
			}
			var sess *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == sessionCookie {
					sess = c
				}
			}
			if sess == nil || sess.Value == "" {
				t.Fatalf("no session cookie in %v", resp.Header["Set-Cookie"])
			}
			if !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.Secure != tc.wantSecure || sess.Path != "/" {
				t.Errorf("session cookie flags: HttpOnly=%v SameSite=%v Secure=%v Path=%q", sess.HttpOnly, sess.SameSite, sess.Secure, sess.Path)
			}
			// The cookie lasts as long as the API's session (12 h by default).
			want := before.Add(12 * time.Hour)
			if d := sess.Expires.Sub(want); d < -time.Minute || d > time.Minute {
				t.Errorf("cookie expires %v, want about %v", sess.Expires, want)
			}
			if sess.MaxAge < int((11*time.Hour)/time.Second) {
				t.Errorf("cookie Max-Age %d, want about 12 h", sess.MaxAge)
			}
		})
	}
}

func TestCSRF(t *testing.T) {
	e := newEnv(t)
	alice := e.browser()
	alice.signup("alice")
	other := e.browser()
	other.signup("other")

	for _, tc := range []struct {
		name   string
		token  string
		header string
		want   int
	}{
		{name: "no token", want: http.StatusForbidden},
		{name: "forged token", token: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", want: http.StatusForbidden},
		{name: "token of another session", token: other.csrf, want: http.StatusForbidden},
		{name: "token of the signup form", token: e.console.csrfToken("pre:0123456789abcdef0123456789abcdef"), want: http.StatusForbidden},
		{name: "htmx header", header: alice.csrf, want: http.StatusSeeOther},
		{name: "form field", token: alice.csrf, want: http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "t-" + strings.ReplaceAll(tc.name, " ", "-")
			form := url.Values{"name": {topic}, csrfField: {tc.token}}
			var hdr []string
			if tc.header != "" {
				hdr = []string{csrfHeader, tc.header}
			}
			resp, body := alice.post("/topics", form, hdr...)
			wantStatus(t, resp, body, tc.want)
			_, err := alice.api().Topic(context.Background(), topic)
			if created := err == nil; created != (tc.want == http.StatusSeeOther) {
				t.Fatalf("topic created=%v after status %d", created, resp.StatusCode)
			}
			if tc.want == http.StatusForbidden {
				wantContains(t, body, "Form expired", "nothing was changed")
			}
		})
	}

	t.Run("htmx carries the token", func(t *testing.T) {
		_, body := alice.get("/topics")
		wantContains(t, body, `hx-headers='{"X-CSRF-Token": "`+alice.csrf+`"}'`)
	})
	t.Run("login without the pre-session cookie", func(t *testing.T) {
		b := e.browser()
		resp, body := b.post("/login", url.Values{"email": {"alice@example.com"}, "password": {"password-alice-1"},
			csrfField: {alice.csrf}})
		wantStatus(t, resp, body, http.StatusForbidden)
		if b.sessionToken() != "" {
			t.Fatal("a rejected login set a session")
		}
	})
	t.Run("logout needs the token", func(t *testing.T) {
		resp, body := alice.post("/logout", url.Values{csrfField: {""}})
		wantStatus(t, resp, body, http.StatusForbidden)
		if _, err := alice.api().Me(context.Background()); err != nil {
			t.Fatalf("session ended by a forged logout: %v", err)
		}
	})
}

func TestSessionExpiryRedirectsToLogin(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signup("expiry")
	resp, body := b.get("/topics")
	wantStatus(t, resp, body, http.StatusOK)

	e.clock.Advance(13 * time.Hour) // past the API's 12 h sessions
	resp, body = b.get("/topics")
	wantStatus(t, resp, body, http.StatusSeeOther)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if loc.Path != "/login" || loc.Query().Get("reason") != "expired" || loc.Query().Get("next") != "/topics" {
		t.Fatalf("redirect to %s, want the login page with reason=expired and next=/topics", loc)
	}
	if b.sessionToken() != "" {
		t.Fatal("the expired session's cookie was kept")
	}
	resp, body = b.get(loc.String())
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Your session has expired")

	t.Run("htmx request", func(t *testing.T) {
		b := e.browser()
		b.signup("expiry-htmx")
		e.clock.Advance(13 * time.Hour)
		req, _ := http.NewRequest(http.MethodGet, e.url+"/api-keys", nil)
		req.Header.Set("HX-Request", "true")
		resp, body := b.do(req)
		wantStatus(t, resp, body, http.StatusNoContent)
		if got := resp.Header.Get("HX-Redirect"); !strings.HasPrefix(got, "/login?") || !strings.Contains(got, "reason=expired") {
			t.Fatalf("HX-Redirect %q", got)
		}
	})
	t.Run("first visit", func(t *testing.T) {
		resp, body := e.browser().get("/")
		wantStatus(t, resp, body, http.StatusSeeOther)
		if got := resp.Header.Get("Location"); got != "/login" {
			t.Fatalf("redirect to %q", got)
		}
	})
	t.Run("no session", func(t *testing.T) {
		resp, body := e.browser().get("/members")
		wantStatus(t, resp, body, http.StatusSeeOther)
		if got := resp.Header.Get("Location"); !strings.Contains(got, "reason=signin") {
			t.Fatalf("redirect to %q", got)
		}
	})
}

func TestErrorRendering(t *testing.T) {
	e := newEnv(t, envOptions{plane: func(c *controlplane.Config) { c.LoginBurst = 2 }})
	b := e.browser()
	b.signup("errors")

	t.Run("api validation error inline", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {"bad name!"}, "partitions": {"3"}})
		wantStatus(t, resp, body, http.StatusBadRequest)
		wantContains(t, body, `id="create-topic-error"`, "a topic name has 1 to 249 characters", "invalid_name",
			`value="bad name!"`, `value="3"`)
	})
	t.Run("console input error", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {"fine"}, "retention_hours": {"soon"}})
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		wantContains(t, body, "retention must be a whole number of hours")
	})
	t.Run("markup is escaped", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {`<script>alert(1)</script>`}})
		wantStatus(t, resp, body, http.StatusBadRequest)
		if strings.Contains(body, "<script>alert") {
			t.Fatal("the rejected name was echoed unescaped")
		}
	})
	t.Run("quota error", func(t *testing.T) {
		resp, body := b.post("/topics", url.Values{"name": {"huge"}, "partitions": {"100000"}})
		if resp.StatusCode < 400 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		wantContains(t, body, `id="create-topic-error"`)
	})
	t.Run("not found page", func(t *testing.T) {
		resp, body := b.get("/topics/nope")
		wantStatus(t, resp, body, http.StatusNotFound)
		wantContains(t, body, `id="page-error"`, "topic_not_found")
	})
	t.Run("operator pages refused to tenants", func(t *testing.T) {
		resp, body := b.get("/admin/tenants")
		wantStatus(t, resp, body, http.StatusForbidden)
	})
	t.Run("wrong password then rate limit", func(t *testing.T) {
		l := e.browser()
		l.get("/login")
		var resp *http.Response
		var body string
		for range 3 {
			resp, body = l.post("/login", url.Values{"email": {"errors@example.com"}, "password": {"wrong-password-1"}})
			if resp.StatusCode == http.StatusTooManyRequests {
				break
			}
			wantStatus(t, resp, body, http.StatusUnauthorized)
			wantContains(t, body, "the email or password is wrong")
		}
		wantStatus(t, resp, body, http.StatusTooManyRequests)
		wantContains(t, body, `id="login-error"`, "too many sign-in attempts")
	})
	t.Run("api unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		deadURL := dead.URL
		dead.Close()
		c, err := New(Config{APIURL: deadURL})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(c)
		defer hs.Close()
		nb := &browser{t: t, e: &env{t: t, url: hs.URL}, hc: e.browser().hc}
		resp, body := nb.get("/login")
		wantStatus(t, resp, body, http.StatusOK)
		resp, body = nb.post("/login", url.Values{"email": {"a@example.com"}, "password": {"password-a-1"}})
		wantStatus(t, resp, body, http.StatusBadGateway)
		wantContains(t, body, "The control plane did not answer")
	})
}

func TestOperatorPages(t *testing.T) {
	e := newEnv(t)
	tb := e.browser()
	tb.signup("busy")
	tb.post("/topics", url.Values{"name": {"orders"}, "partitions": {"6"}})
	e.browser().signup("quiet")
	e.operator("ops@example.com", "operator-password-1")

	b := e.browser()
	b.get("/login")
	resp, body := b.post("/login", url.Values{"email": {"ops@example.com"}, "password": {"operator-password-1"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if got := resp.Header.Get("Location"); got != "/admin/tenants" {
		t.Fatalf("operator sent to %q", got)
	}
	resp, body = b.get("/admin/tenants")
	wantStatus(t, resp, body, http.StatusOK)
	if i, j := strings.Index(body, ">busy<"), strings.Index(body, ">quiet<"); i < 0 || j < 0 || i > j {
		t.Fatalf("tenants not listed by load (busy at %d, quiet at %d):\n%s", i, j, body)
	}
	resp, body = b.get("/admin/cells")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `href="/admin/cells/cell-1"`)
	resp, body = b.get("/admin/cells/cell-1")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "cell-1-b1", "127.0.0.1:19092")

	ts, err := e.op.AdminTenants(context.Background(), "name")
	if err != nil {
		t.Fatal(err)
	}
	id := ts[0].ID
	resp, body = b.get("/admin/tenants/" + id)
	wantStatus(t, resp, body, http.StatusOK)
	form := url.Values{}
	for _, m := range regexpFields.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], m[2])
	}
	form.Set("max_topics", "7")
	resp, body = b.post("/admin/tenants/"+id+"/quotas", form)
	wantStatus(t, resp, body, http.StatusSeeOther)
	q, err := e.op.AdminQuotas(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxTopics != 7 {
		t.Fatalf("max topics %d after the edit, want 7", q.MaxTopics)
	}
	resp, body = b.get(resp.Header.Get("Location"))
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Quotas saved.")
	if _, body = b.get("/admin/tenants/" + id); strings.Contains(body, "Quotas saved.") {
		t.Fatalf("the saved notice shows without ?saved=1:\n%s", body)
	}
	form.Set("max_topics", "seven")
	resp, body = b.post("/admin/tenants/"+id+"/quotas", form)
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, "Max topics must be a whole number")
}

func TestStaticAssets(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for _, tc := range []struct {
		name, path string
		status     int
		wantType   string
	}{
		{name: "htmx", path: "/static/htmx.min.js", status: http.StatusOK, wantType: "javascript"},
		{name: "stylesheet", path: "/static/console.css", status: http.StatusOK, wantType: "text/css"},
		{name: "script", path: "/static/console.js", status: http.StatusOK, wantType: "javascript"},
		{name: "no listing", path: "/static/", status: http.StatusNotFound},
		{name: "missing", path: "/static/nope.js", status: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.get(tc.path)
			wantStatus(t, resp, body, tc.status)
			if !strings.Contains(resp.Header.Get("Content-Type"), tc.wantType) {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Fatalf("CSP %q", csp)
			}
		})
	}
}
