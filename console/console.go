// Package console is Sluice's web console: server-rendered pages (Go
// html/template with htmx) for signing up and in, one's tenants (switching, creating more), topics, API keys, ACLs,
// members, consumer groups, usage, and the operator's views of tenants,
// pools, cells, brokers (drain, removal) and replica moves. It owns the browser session cookie and CSRF protection; everything
// else it asks of the control plane through contract/client over HTTP,
// exactly as any other API caller would. Its assets are embedded, so the
// console needs nothing from outside the binary.
//
// Only tenantd imports this package; it mounts the handler at "/" next to the
// API's "/v1/".
package console

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures a console.
type Config struct {
	// APIURL is the base URL of the control plane's /v1 API, e.g.
	// http://127.0.0.1:8080; required.
	APIURL string
	// HTTPClient calls the API (default: one with a 30 s timeout).
	HTTPClient *http.Client
	// SecureCookies marks the session cookie Secure even on plain-HTTP
	// requests, for a console behind a TLS-terminating proxy (default false:
	// Secure only when the request itself came over TLS).
	SecureCookies bool
	// CSRFKey keys the per-session CSRF tokens. Consoles behind one load
	// balancer share it; at least 32 bytes (default: random per process, so
	// a restart asks open forms to be reloaded).
	CSRFKey []byte
	// KafkaTLS says the brokers' Kafka listeners use TLS, which the client
	// configs on the overview page then ask for (default false:
	// SASL_PLAINTEXT).
	KafkaTLS bool
	// ConsoleSecret is shared with the control plane (controlplane.Config's
	// field of the same name; at least 32 bytes). The console tags its
	// sign-in and signup calls with the browser's address under it, so the
	// API limits attempts per browser rather than per console. Default: none,
	// and every browser shares the console's address's limit.
	ConsoleSecret []byte
	// Logger gets failed API calls and rejected requests; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.APIURL == "" {
		return errors.New("console config: APIURL is required")
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("console config: APIURL %q is not an http(s) URL", c.APIURL)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.CSRFKey == nil {
		c.CSRFKey = make([]byte, 32)
		if _, err := rand.Read(c.CSRFKey); err != nil {
			return fmt.Errorf("console config: generate CSRF key: %w", err)
		}
	}
	if len(c.CSRFKey) < 32 {
		return fmt.Errorf("console config: CSRFKey has %d bytes; it needs at least 32", len(c.CSRFKey))
	}
	if c.ConsoleSecret != nil && len(c.ConsoleSecret) < credential.MinConsoleSecretLen {
		return fmt.Errorf("console config: ConsoleSecret has %d bytes; it needs at least %d", len(c.ConsoleSecret), credential.MinConsoleSecretLen)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Console is the console's HTTP handler.
type Console struct {
	cfg   Config
	log   *slog.Logger
	api   *client.Client // no credential; each request adds its session
	pages map[string]*pageTemplate
	mux   *http.ServeMux
}

// New returns a console that calls the API at cfg.APIURL.
func New(cfg Config) (*Console, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("new console: %w", err)
	}
	c := &Console{
		cfg:   cfg,
		log:   cfg.Logger,
		api:   client.New(cfg.APIURL, client.WithHTTPClient(cfg.HTTPClient)),
		pages: pages,
		mux:   http.NewServeMux(),
	}
	c.routes()
	return c, nil
}

// ServeHTTP serves the console with security headers on every answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := c.mux
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	m.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			c.notFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})))

	m.HandleFunc("GET /signup", c.signupPage)
	m.HandleFunc("POST /signup", c.anonPOST(c.signup))
	m.HandleFunc("GET /signup/confirm", c.confirmSignupPage)
	m.HandleFunc("POST /signup/confirm", c.anonPOST(c.confirmSignup))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.anonPOST(c.login))
	m.HandleFunc("POST /login/operator", c.anonPOST(c.operatorLogin))
	m.HandleFunc("POST /logout", c.authed(c.logout))

	m.HandleFunc("GET /{$}", c.authed(c.overview))
	m.HandleFunc("GET /topics", c.authed(c.topicsPage))
	m.HandleFunc("POST /topics", c.authed(c.createTopic))
	m.HandleFunc("GET /topics/{name}", c.authed(c.topicPage))
	m.HandleFunc("POST /topics/{name}", c.authed(c.updateTopic))
	m.HandleFunc("POST /topics/{name}/delete", c.authed(c.deleteTopic))
	m.HandleFunc("GET /topics/{name}/messages", c.authed(c.messagesPage))
	m.HandleFunc("POST /topics/{name}/messages", c.authed(c.readMessages))

	m.HandleFunc("GET /api-keys", c.authed(c.keysPage))
	m.HandleFunc("POST /api-keys", c.authed(c.createKey))
	m.HandleFunc("POST /api-keys/{id}/revoke", c.authed(c.revokeKey))

	m.HandleFunc("GET /acls", c.authed(c.aclsPage))
	m.HandleFunc("POST /acls", c.authed(c.createACL))
	m.HandleFunc("POST /acls/{id}/delete", c.authed(c.deleteACL))

	m.HandleFunc("GET /groups", c.authed(c.groupsPage))
	m.HandleFunc("GET /groups/{group}", c.authed(c.groupPage))
	m.HandleFunc("GET /usage", c.authed(c.usagePage))
	m.HandleFunc("GET /usage.csv", c.authed(c.usageCSV))

	m.HandleFunc("GET /tenants", c.authed(c.tenantsPage))
	m.HandleFunc("POST /tenants", c.authed(c.createTenant))
	m.HandleFunc("POST /tenants/switch", c.authed(c.switchTenant))

	m.HandleFunc("GET /members", c.authed(c.membersPage))
	m.HandleFunc("POST /members", c.authed(c.addMember))
	m.HandleFunc("POST /members/{id}/role", c.authed(c.changeMemberRole))
	m.HandleFunc("POST /members/{id}/remove", c.authed(c.removeMember))

	m.HandleFunc("GET /admin/tenants", c.authed(c.adminTenantsPage))
	m.HandleFunc("GET /admin/tenants/{id}", c.authed(c.adminTenantPage))
	m.HandleFunc("POST /admin/tenants/{id}/quotas", c.authed(c.adminSetQuotas))
	m.HandleFunc("GET /admin/pools", c.authed(c.adminPoolsPage))
	m.HandleFunc("POST /admin/pools", c.authed(c.adminCreatePool))
	m.HandleFunc("GET /admin/cells", c.authed(c.adminCellsPage))
	m.HandleFunc("POST /admin/cells", c.authed(c.adminCreateCell))
	m.HandleFunc("GET /admin/cells/{cell}", c.authed(c.adminCellPage))
	m.HandleFunc("POST /admin/cells/{cell}/brokers", c.authed(c.adminCreateBroker))
	m.HandleFunc("GET /admin/cells/{cell}/brokers/{id}", c.authed(c.adminBrokerPage))
	m.HandleFunc("POST /admin/cells/{cell}/brokers/{id}/drain", c.authed(c.adminDrainBroker))
	m.HandleFunc("POST /admin/cells/{cell}/brokers/{id}/delete", c.authed(c.adminDeleteBroker))
	m.HandleFunc("GET /admin/moves", c.authed(c.adminMovesPage))
	m.HandleFunc("POST /admin/moves", c.authed(c.adminCreateMove))
	m.HandleFunc("POST /admin/moves/{id}/cancel", c.authed(c.adminCancelMove))
	m.HandleFunc("POST /admin/tenants/{id}/move", c.authed(c.adminMoveTenant))
	m.HandleFunc("GET /admin/tenant-moves", c.authed(c.adminTenantMovesPage))
	m.HandleFunc("GET /admin/tenant-moves/{id}", c.authed(c.adminTenantMovePage))
	m.HandleFunc("POST /admin/tenant-moves/{id}/cancel", c.authed(c.adminCancelTenantMove))
	m.HandleFunc("POST /admin/tenant-moves/{id}/rate", c.authed(c.adminSetTenantMoveRate))
	m.HandleFunc("GET /admin/usage", c.authed(c.adminUsagePage))

	m.HandleFunc("/", c.notFound)
}

// anonAPI is the API client for a sign-in or signup on behalf of the
// browser behind r: with ConsoleSecret, it names the browser's address, so
// the API's per-address limits count this browser, not the console. The
// address is the connection's peer; no forwarding header is trusted.
func (c *Console) anonAPI(r *http.Request) *client.Client {
	if c.cfg.ConsoleSecret == nil {
		return c.api
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return c.api
	}
	v := credential.SignConsoleClient(c.cfg.ConsoleSecret, host)
	if v == "" {
		return c.api
	}
	return c.api.With(client.WithHeader(credential.ConsoleClientHeader, v))
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.renderMessage(w, r, nil, http.StatusNotFound, "Not found", "There is no page at "+r.URL.Path+".")
}

// safeNext keeps a post-login redirect on this site: only a path of the
// console (with an optional query) survives, anything else becomes "/".
// Browsers drop tabs and newlines from URLs and read "\\" as "/", so
// "/\t/evil.example" or "/\\evil.example" would leave the site; the value is
// refused if it has either, has a scheme or a host, starts with "//" once
// decoded, or is not a clean path.
func safeNext(next string) string {
	const home = "/"
	if next == "" || len(next) > 2048 || !utf8.ValidString(next) {
		return home
	}
	for _, r := range next {
		if r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return home
		}
	}
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return home
	}
	// The decoded path must pass the same checks: "/%2F%2Fevil" is "///evil".
	for _, r := range u.Path {
		if r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return home
		}
	}
	// Only a clean path is taken: "/./" or "/a/../" tricks are refused, not
	// repaired, and the answer keeps the caller's escaping.
	if path.Clean(u.Path) != u.Path || strings.HasPrefix(u.Path, "//") {
		return home
	}
	// The API and the internal routes share the origin but are not pages.
	for _, p := range []string{"/v1", "/internal", "/metrics", "/healthz"} {
		if u.Path == p || strings.HasPrefix(u.Path, p+"/") {
			return home
		}
	}
	out := u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}
