package console

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// env is one server, as tenantd will run it: the control plane's API under
// /v1/ and the console at /, on a fresh database with one shared pool, one
// cell of three brokers and an operator key.
type env struct {
	t       *testing.T
	url     string
	db      *pgxpool.Pool
	op      *client.Client
	clock   *cptest.Clock
	console *Console
	// opKey is the operator key, "id:secret", as tenantd dev prints it.
	opKey string
	// mail is the directory the control plane writes its mail to.
	mail string
}

type envOptions struct {
	plane   func(*controlplane.Config)
	console func(*Config)
}

func newEnv(t *testing.T, opts ...envOptions) *env {
	t.Helper()
	clk := cptest.NewClock()
	logger := testkit.Logger(t, slog.LevelWarn)
	// One secret for both, as tenantd wires them.
	consoleSecret := make([]byte, 32)
	if _, err := rand.Read(consoleSecret); err != nil {
		t.Fatal(err)
	}
	configure := []func(*controlplane.Config){func(c *controlplane.Config) {
		c.Now, c.Logger, c.ConsoleSecret = clk.Now, logger, consoleSecret
	}}
	for _, o := range opts {
		if o.plane != nil {
			configure = append(configure, o.plane)
		}
	}
	var con *Console
	mount := func(plane http.Handler, url string) http.Handler {
		ccfg := Config{APIURL: url, Logger: logger, ConsoleSecret: consoleSecret}
		for _, o := range opts {
			if o.console != nil {
				o.console(&ccfg)
			}
		}
		var err error
		if con, err = New(ccfg); err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/v1/", plane)
		mux.Handle("/internal/", plane)
		mux.Handle("/", con)
		return mux
	}
	cp := cptest.StartMounted(t, cptest.Brokers{KafkaAddrs: cptest.TestAddrs.KafkaAddrs}, mount, configure...)
	return &env{t: t, url: cp.URL, db: cp.DB, clock: clk, console: con, opKey: cp.OperatorKeyID + ":" + cp.OperatorSecret, mail: cp.MailDir,
		op: cp.Operator}
}

// mailToken is the token of the newest mail the control plane sent to.
func (e *env) mailToken(to string) string {
	e.t.Helper()
	text, err := mail.Last(e.mail, to)
	if err != nil {
		e.t.Fatal(err)
	}
	tok := mail.Token(text)
	if tok == "" {
		e.t.Fatalf("the newest mail to %s has no token:\n%s", to, text)
	}
	return tok
}

func (e *env) must(_ any, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// operator creates a platform operator who signs in with a password. Sluice
// has no API for that (operators are made by hand), so the test writes the
// row itself.
func (e *env) operator(email, password string) {
	e.t.Helper()
	_, err := e.db.Exec(context.Background(), `INSERT INTO users (id, email, password_hash, is_operator) VALUES ($1, $2, $3, true)`,
		credential.NewID("us_"), email, credential.HashPassword(password))
	if err != nil {
		e.t.Fatal(err)
	}
}

// browser is a cookie-keeping HTTP client of the console that does not
// follow redirects, so tests see them.
type browser struct {
	t    *testing.T
	e    *env
	hc   *http.Client
	csrf string // the token of the last page that had a form
}

func (e *env) browser() *browser { return e.browserFrom("") }

// browserFrom is a browser whose connections come from the loopback address
// ip (e.g. 127.0.0.2), so the console sees another client; "" is the
// system's choice.
func (e *env) browserFrom(ip string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if ip != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		hc.Transport = &http.Transport{DialContext: d.DialContext}
	}
	return &browser{t: e.t, e: e, hc: hc}
}

var csrfRE = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// do sends a request and returns the answer with its body read.
func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	body := string(raw)
	if m := csrfRE.FindStringSubmatch(body); m != nil {
		b.csrf = m[1]
	}
	return resp, body
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.e.url+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form with the last page's CSRF token, unless the form
// carries its own csrf_token (even an empty one).
func (b *browser) post(path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	if _, ok := form[csrfField]; !ok {
		form.Set(csrfField, b.csrf)
	}
	if len(form[csrfField]) == 1 && form.Get(csrfField) == "" {
		form.Del(csrfField)
	}
	req, err := http.NewRequest(http.MethodPost, b.e.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

// signup creates a tenant through the console and keeps its session.
func (b *browser) signup(tenant string) {
	b.t.Helper()
	b.get("/signup")
	resp, body := b.post("/signup", url.Values{"tenant_name": {tenant}, "email": {tenant + "@example.com"},
		"password": {"password-" + tenant + "-1"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="confirm-form"`) {
		b.t.Fatalf("signup %s: status %d: %s", tenant, resp.StatusCode, body)
	}
	resp, body = b.post("/signup/confirm", url.Values{"token": {b.e.mailToken(tenant + "@example.com")}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("confirm signup %s: status %d: %s", tenant, resp.StatusCode, body)
	}
	b.get("/") // pick up the session's CSRF token
}

// sessionToken is the API session the browser holds.
func (b *browser) sessionToken() string {
	u, _ := url.Parse(b.e.url)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			return c.Value
		}
	}
	return ""
}

// api is the API client with the browser's session.
func (b *browser) api() *client.Client {
	return client.New(b.e.url, client.WithSession(b.sessionToken()))
}

func wantStatus(t *testing.T, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func wantContains(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Fatalf("page lacks %q; body:\n%s", w, body)
		}
	}
}

// regexpFields reads the quota inputs of the operator's quota form.
var regexpFields = regexp.MustCompile(`name="([a-z_]+)" type="number" min="0" required value="(-?[0-9]+)"`)
