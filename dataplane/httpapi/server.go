package httpapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/keyhome"
	"github.com/sluicehq/sluice/dataplane/toptenants"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on, such as "127.0.0.1:8091". Ignored
	// when Listener is set; one of the two is required.
	Addr string
	// Listener, when set, is used instead of listening on Addr. The Server
	// closes it.
	Listener net.Listener
	// NodeID is this broker's node id in its cell; required (≥ 1).
	NodeID int
	// State is the broker's view of its cell; required.
	State *cellview.Syncer
	// Partitions are the replicas this broker holds; required.
	Partitions Partitions
	// ProducerIDs, when set, serves POST /v1/producer-ids (ids for
	// idempotent publishes); the Partitions must then deduplicate and fence
	// as partition.Replica does. Unset, publishes with a producer id are
	// refused.
	ProducerIDs ProducerIDs
	// Groups, when set, serves the consumer-group endpoints with this
	// broker's coordinator; unset, they answer unavailable.
	Groups *groups.Coordinator
	// ControlPlane, when set, is a client of the control plane's public
	// API without a credential: a group's dead-letter topic is then
	// created on first use with the caller's own key. Unset, it must
	// exist before a message is dead-lettered.
	ControlPlane *client.Client
	// RetryAttempts is how many deliveries of a message a group member may
	// nack before the message goes to the group's dead-letter topic.
	// Default 5.
	RetryAttempts int
	// RetryBackoff is the wait after the first nack, doubled after each
	// further one up to RetryMaxBackoff. Defaults 1 s and 1 min.
	RetryBackoff, RetryMaxBackoff time.Duration
	// Admit, when set, is asked before every publish and every read
	// whether the tenant may go on (quotas); a read's Bytes and Messages
	// are then 0, as nothing is read yet. An error it returns is the
	// answer; one with a RetryAfter() time.Duration method also sets the
	// Retry-After header.
	Admit func(ctx context.Context, a Admission) error
	// Record, when set, is told what an admitted request moved: after a
	// publish commits, and after a read with what it returns.
	Record func(a Admission)
	// Usage meters what publishes append and reads return (nil: none).
	Usage *usage.Meter
	// Registerer receives the API's metrics. The API does not serve them:
	// its port is the tenants', and the series are the operator's (tenantd
	// registers them with the broker's, on its metrics listener). Default:
	// a private registry, i.e. not exported.
	Registerer prometheus.Registerer
	// TenantLabels bounds the tenant label of the per-tenant request
	// metrics (nil: the TopTenants busiest of this API).
	TenantLabels *toptenants.Labels
	// Logger; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body (413 body_too_large). Default 16 MiB.
	MaxBodyBytes int64
	// MaxWait caps a read's max_wait_ms long poll. Default 30 s.
	MaxWait time.Duration
	// ForwardTimeout bounds a request forwarded to the partition's leader,
	// beyond the long poll it asked for. Default 10 s.
	ForwardTimeout time.Duration
	// PeerKey is the secret the cell's brokers share to prove to each
	// other that a request was forwarded by one of them (peer.go), at
	// least 16 bytes; tenantd derives it from the cell key's secret
	// (PeerKeyFrom). A proven forward is not counted again against the
	// tenant's request rate. Unset, forwards carry no proof and every
	// request is counted on every broker it reaches.
	PeerKey []byte
	// TLS, when set, makes the API serve HTTPS only (a plaintext request
	// on its port gets no answer), and forwards to other brokers then dial
	// https: a cell's brokers serve TLS alike. Its GetCertificate may swap
	// the certificate for new connections.
	TLS *tls.Config
	// ForwardCAs are the roots a forward trusts in another broker's
	// certificate when TLS is set; nil means the system's roots. Ignored
	// when Client is set.
	ForwardCAs *x509.CertPool
	// Homes, when set, is asked about API keys this cell does not know: a
	// request with a valid key of a tenant homed on another cell is
	// proxied to a broker of that cell (follow.go). Unset, such keys fail
	// like any wrong key. Production: the control plane's key-home lookup
	// with the broker's cell key, as the Kafka listener's.
	Homes keyhome.Homes
	// HomeLimits bound the lookups Homes serves; zero fields take their
	// defaults.
	HomeLimits keyhome.Limits
	// Client forwards requests to other brokers; default a client with
	// ForwardTimeout-bounded requests and no redirects.
	Client *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Admission describes one request a tenant makes, for Config.Admit.
type Admission struct {
	Principal *cellview.Principal
	Op        string // OpPublish or OpRead
	Topic     string
	Messages  int
	Bytes     int64
	// Forwarded is set when another broker of the cell forwarded the
	// request (proven with Config.PeerKey): it was admitted, and its
	// request counted, where it entered the cell.
	Forwarded bool
}

// Operations named in Admission.
const (
	OpPublish = "publish"
	OpRead    = "read"
)

// ProducerIDs hands out producer ids for idempotent publishes, each at
// most once across the platform (kafka.ProducerIDBlocks is one).
type ProducerIDs interface {
	Next(ctx context.Context) (int64, error)
}

func (c *Config) validate() error {
	switch {
	case c.Listener == nil && c.Addr == "":
		return errors.New("httpapi config: Addr or Listener is required")
	case c.NodeID < 1:
		return fmt.Errorf("httpapi config: NodeID must be at least 1, got %d", c.NodeID)
	case c.State == nil:
		return errors.New("httpapi config: State is required")
	case c.Partitions == nil:
		return errors.New("httpapi config: Partitions is required")
	case c.MaxBodyBytes < 0 || c.MaxWait < 0 || c.ForwardTimeout < 0:
		return errors.New("httpapi config: limits and timeouts must not be negative")
	case len(c.PeerKey) > 0 && len(c.PeerKey) < minPeerKey:
		return fmt.Errorf("httpapi config: PeerKey must be at least %d bytes, got %d", minPeerKey, len(c.PeerKey))
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 16<<20)
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("httpapi config: MaxBodyBytes %d is below 1 KiB", c.MaxBodyBytes)
	}
	c.MaxWait = cmp.Or(c.MaxWait, 30*time.Second)
	c.ForwardTimeout = cmp.Or(c.ForwardTimeout, 10*time.Second)
	c.RetryAttempts = cmp.Or(c.RetryAttempts, 5)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, time.Second)
	c.RetryMaxBackoff = cmp.Or(c.RetryMaxBackoff, time.Minute)
	if c.RetryAttempts < 1 || c.RetryBackoff < 0 || c.RetryMaxBackoff < c.RetryBackoff {
		return errors.New("httpapi config: RetryAttempts must be at least 1 and RetryMaxBackoff at least RetryBackoff")
	}
	if err := c.HomeLimits.Fill(); err != nil {
		return fmt.Errorf("httpapi config: %w", err)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Client == nil {
		c.Client = &http.Client{
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
				DialContext:     (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				TLSClientConfig: &tls.Config{RootCAs: c.ForwardCAs, MinVersion: tls.VersionTLS12}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Server is a broker's HTTP data API.
type Server struct {
	cfg     Config
	ln      net.Listener
	echo    *echo.Echo
	hs      *http.Server
	metrics *metrics
	ctx     context.Context // ends at Close; bounds every wait of a request
	cancel  context.CancelFunc

	sticky   atomic.Uint32 // spreads null-key publishes over partitions
	sessions sessions      // HTTP group members this broker coordinates

	homes *keyhome.Cache // key-home answers; nil without Config.Homes

	// afterDeadLetter, when set (by tests, to inject a fault), runs after
	// a dead letter is published and before its offset is committed.
	// beforeReadWrite, when set (by tests, to inject a fault), runs
	// between a read's answer computed and its writing (writeMetered).
	beforeReadWrite atomic.Pointer[func(*http.Request)]
	afterDeadLetter atomic.Pointer[func()]

	// mu guards the fields below.
	mu      sync.Mutex
	serving bool
	closed  bool
}

// New checks cfg and starts listening; Serve answers requests.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, cfg.TenantLabels)
	if err != nil {
		return nil, fmt.Errorf("register http api metrics: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen for http clients: %w", err)
		}
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ln: ln, metrics: m, ctx: ctx, cancel: cancel}
	s.sticky.Store(uint32(cfg.NodeID) * 7919)
	if cfg.Homes != nil {
		s.homes = keyhome.NewCache(cfg.Homes, cfg.HomeLimits, cfg.Now)
	}
	s.echo = s.routes()
	s.hs = &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Handler is the API's handler (the server's own listener serves it too).
func (s *Server) Handler() http.Handler { return s.echo }

// Serve answers requests until ctx ends or Close is called, then closes
// the server and returns nil. It may be called once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || s.serving {
		s.mu.Unlock()
		return errors.New("httpapi: server closed or already serving")
	}
	s.serving = true
	s.mu.Unlock()
	unhook := context.AfterFunc(ctx, func() { s.Close() })
	defer unhook()
	s.cfg.Logger.Info("http data api serving", "addr", s.ln.Addr().String(), "node", s.cfg.NodeID, "tls", s.cfg.TLS != nil)
	err := s.hs.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the listener, ends every long poll and waits (up to 10 s)
// for requests in flight. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	serving := s.serving
	s.mu.Unlock()
	s.cancel()
	if !serving {
		return s.ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil {
		return s.hs.Close()
	}
	return nil
}

// routes builds the echo router. ':' inside a path segment is escaped
// ("\\:") so that echo takes it literally rather than as a parameter.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Pre(unescapeColons)
	e.Use(s.metrics.middleware)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	// Registered on e, not on the authenticated group: an exact route wins
	// over the group's catch-all, so the document needs no credentials.
	e.GET("/v1/openapi.json", s.openAPI)
	v1 := e.Group("/v1", s.authenticate)
	v1.POST("/topics/:topic/messages\\:publish", s.publish)
	v1.GET("/topics/:topic/partitions/:partition/messages", s.read)
	v1.POST("/producer-ids", s.producerID)
	v1.GET("/topics/:topic/partitions/:partition/offsets", s.partitionOffsets)
	v1.POST("/topics/:topic/partitions/:partition/records\\:delete", s.deleteRecords)
	v1.POST("/groups/:group/members", s.join)
	v1.DELETE("/groups/:group/members/:member", s.leave)
	v1.POST("/groups/:group/messages\\:fetch", s.groupFetch)
	v1.POST("/groups/:group/messages\\:nack", s.nack)
	v1.POST("/groups/:group/offsets\\:commit", s.commit)
	v1.POST("/groups/:group/offsets\\:reset", s.reset)
	v1.POST("/groups/:group/dead-letters\\:redrive", s.redrive)
	return e
}
