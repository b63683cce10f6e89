// Package controlplane is Sluice's control plane: the /v1 HTTP API (echo)
// over Postgres (pgx) that manages tenants, users, API keys, ACLs, quotas,
// topics and the pools, cells and brokers they are placed on.
//
// Only tenantd imports this package. Other parts of Sluice talk to it over
// HTTP, through contract/client, and share with it only what lives under
// contract/ (the API's shapes, the error catalogue, the authorization
// model, credentials, topic rules and the wire state).
package controlplane

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// Config configures a control plane server.
type Config struct {
	// DB is the Postgres pool; required. Migrations must already be applied.
	DB *pgxpool.Pool
	// Logger gets one line per failed request and per lifecycle event;
	// nil discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	// SessionTTL is how long a sign-in lasts (default 12h).
	SessionTTL time.Duration
	// LoginRate and LoginBurst bound sign-in attempts per email and per
	// client address (default one every 6 s, burst 10).
	LoginRate  time.Duration
	LoginBurst int
	// SignupRate and SignupBurst bound signups per client address (default
	// one every 2 s, burst 30).
	SignupRate  time.Duration
	SignupBurst int
	// TenantCreateRate and TenantCreateBurst bound the tenants a signed-in
	// user creates with POST /v1/tenants, per user (default one every 30 s,
	// burst 5).
	TenantCreateRate  time.Duration
	TenantCreateBurst int
	// MaxOwnedTenants bounds the tenants a user owns, counted when the user
	// creates another with POST /v1/tenants (default 10). Signup always
	// makes a new user, so it never reaches the cap.
	MaxOwnedTenants int
	// MaxActiveKeys bounds a tenant's unrevoked API keys (default 10; at
	// least 2, so keys can be rotated without downtime).
	MaxActiveKeys int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Registerer receives the API's Prometheus metrics (default: a private
	// registry, i.e. not exported).
	Registerer prometheus.Registerer
	// ConsoleSecret, shared with the console (at least 32 bytes), lets the
	// console name the browser behind its sign-in and signup calls (see
	// credential.ConsoleClientHeader): those calls are then rate-limited by
	// the browser's address, not the console's. Calls without a valid tag
	// are limited by their own address. Default: none, so every call is
	// limited by its own address.
	ConsoleSecret []byte
	// Metrics, when set, is served at GET /metrics to platform operators
	// only (an operator API key or an operator's session): the series name
	// tenants, topics and groups, so no tenant and no anonymous caller may
	// read them. Default: no /metrics route.
	Metrics http.Handler
	// Mailer sends the signup confirmations and the news signup keeps out
	// of its answers (an address or tenant name already taken). Production
	// plugs a real mailer in here; default mail.Log, which sends nothing
	// and writes each message to Logger.
	Mailer mail.Mailer
	// RateLimitRedis, when set, keeps the rate limits' buckets (sign-in,
	// signup, tenant creation, key-home lookups) in this Redis, shared by
	// every control plane instance on it, so a limit holds across all of
	// them. While it does not answer, and when unset (the default), each
	// instance limits in its own memory: the effective limit is then up to
	// N times the configured one with N instances.
	RateLimitRedis redis.UniversalClient
	// RateLimitNamespace prefixes the limits' Redis keys
	// (NAMESPACE:cp:rate:...), so control planes of separate deployments
	// may share one Redis (default "sluice").
	RateLimitNamespace string
	// SignupTTL is how long a signup's mailed token stays valid (default
	// 24h).
	SignupTTL time.Duration
	// OffsetsPartitions is how many consumer-group offsets partitions each
	// cell has: the brokers' count (default 8, groups.DefaultPartitions,
	// which tenantd's brokers run with). The control plane needs it to
	// take a cell's offsets placement over, and assumes every broker of
	// every cell runs with this count.
	OffsetsPartitions int
	// CellStatePoll is how often a broker's waiting long-poll of its cell
	// state reads the cell's version again (default 250 ms). A change is
	// normally answered at once, woken by the notification the changing
	// transaction sends (statenotify.go); this is the fallback.
	CellStatePoll time.Duration
}

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("controlplane config: DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Mailer == nil {
		c.Mailer = mail.Log{Logger: c.Logger}
	}
	c.RateLimitNamespace = cmp.Or(c.RateLimitNamespace, "sluice")
	c.SignupTTL = cmp.Or(c.SignupTTL, 24*time.Hour)
	c.OffsetsPartitions = cmp.Or(c.OffsetsPartitions, defaultOffsetsPartitions)
	if c.OffsetsPartitions < 1 {
		return fmt.Errorf("controlplane config: OffsetsPartitions %d is below 1", c.OffsetsPartitions)
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("controlplane config: MaxBodyBytes %d is below 1 KiB", c.MaxBodyBytes)
	}
	c.CellStatePoll = cmp.Or(c.CellStatePoll, 250*time.Millisecond)
	if c.CellStatePoll < 0 {
		return fmt.Errorf("controlplane config: CellStatePoll %v is negative", c.CellStatePoll)
	}
	c.SessionTTL = cmp.Or(c.SessionTTL, 12*time.Hour)
	c.LoginRate = cmp.Or(c.LoginRate, 6*time.Second)
	c.LoginBurst = cmp.Or(c.LoginBurst, 10)
	c.SignupRate = cmp.Or(c.SignupRate, 2*time.Second)
	c.SignupBurst = cmp.Or(c.SignupBurst, 30)
	c.TenantCreateRate = cmp.Or(c.TenantCreateRate, 30*time.Second)
	c.TenantCreateBurst = cmp.Or(c.TenantCreateBurst, 5)
	c.MaxOwnedTenants = cmp.Or(c.MaxOwnedTenants, 10)
	if c.MaxOwnedTenants < 1 {
		return fmt.Errorf("controlplane config: MaxOwnedTenants %d is below 1", c.MaxOwnedTenants)
	}
	c.MaxActiveKeys = cmp.Or(c.MaxActiveKeys, 10)
	if c.MaxActiveKeys < 2 {
		return fmt.Errorf("controlplane config: MaxActiveKeys %d is below 2; keys could not be rotated without downtime", c.MaxActiveKeys)
	}
	if c.ConsoleSecret != nil && len(c.ConsoleSecret) < credential.MinConsoleSecretLen {
		return fmt.Errorf("controlplane config: ConsoleSecret has %d bytes; it needs at least %d", len(c.ConsoleSecret), credential.MinConsoleSecretLen)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return nil
}

// Server is the control plane's HTTP API.
type Server struct {
	cfg     Config
	db      *pgxpool.Pool
	log     *slog.Logger
	authz   *authz.API
	echo    *echo.Echo
	logins  *limiter
	signups *limiter
	// tenantCreates limits POST /v1/tenants per user.
	tenantCreates *limiter
	// keyHomes limits the key lookups of each cell's brokers.
	keyHomes *limiter
	metrics  *metrics
	// stateChanges wakes cell-state long-polls (statenotify.go).
	stateChanges *stateNotifier
}

// New returns a server over cfg.DB.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	az, err := authz.NewAPI()
	if err != nil {
		return nil, fmt.Errorf("new control plane: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register control plane metrics: %w", err)
	}
	s := &Server{
		metrics: m,
		cfg:     cfg,
		db:      cfg.DB,
		log:     cfg.Logger,
		authz:   az,
		logins:  newLimiter("login", cfg.LoginRate, cfg.LoginBurst, &cfg),
		signups: newLimiter("signup", cfg.SignupRate, cfg.SignupBurst, &cfg),

		tenantCreates: newLimiter("tenant_create", cfg.TenantCreateRate, cfg.TenantCreateBurst, &cfg),

		keyHomes: newLimiter("key_home", keyHomeEvery, keyHomeBurst, &cfg),

		stateChanges: newStateNotifier(cfg.DB, cfg.Logger),
	}
	s.echo = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.echo }

// Routes lists the registered API routes, for the OpenAPI and isolation
// checks. Echo's internal not-found routes of groups are left out.
func (s *Server) Routes() []*echo.Route {
	var out []*echo.Route
	for _, r := range s.echo.Routes() {
		if r.Method != echo.RouteNotFound {
			out = append(out, r)
		}
	}
	return out
}
