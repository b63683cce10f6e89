package kafka

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/toptenants"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on, such as "127.0.0.1:9092". Ignored
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
	// ControlPlane, when set, is a client of the control plane's public API
	// without a credential: CreateTopics and DeleteTopics are then served
	// by calling it with the caller's own API key. Unset, they are not
	// advertised.
	ControlPlane *client.Client
	// CellControlPlane, when set with ControlPlane, is the control plane's
	// API with this broker's cell key: administration over a connection
	// that authenticated without sending the secret (SCRAM) is served by
	// calling /v1 on behalf of the connection's key (client.OnBehalfOf),
	// with exactly that key's role and ACLs. Unset, such connections are
	// refused administration and told to use SASL/PLAIN.
	CellControlPlane *client.Client
	// ProducerIDs, when set, serves InitProducerId, so clients produce
	// idempotently (producer id, epoch and sequence in each batch); the
	// Partitions must then deduplicate and fence as partition.Replica
	// does. Unset, InitProducerId is not advertised and clients turn
	// idempotence off. Production: a ProducerIDBlocks over the control
	// plane's cell API.
	ProducerIDs ProducerIDs
	// Groups, when set, serves the consumer-group APIs (FindCoordinator,
	// Join/Sync/Heartbeat/LeaveGroup, OffsetCommit/Fetch/Delete,
	// List/Describe/DeleteGroups) with this broker's coordinator. Unset,
	// they are not advertised.
	Groups *groups.Coordinator
	// Homes, when set, is asked about API keys this cell does not know:
	// a valid key of a tenant homed on another cell gets a redirect
	// session, whose Metadata points the client to that cell (see
	// redirect.go). Unset, such keys fail authentication like any wrong
	// key. Production: the control plane's key-home lookup with the
	// broker's cell key.
	Homes Homes
	// HomeLimits bound the lookups Homes serves; zero fields take their
	// defaults.
	HomeLimits HomeLimits
	// Logger; nil discards.
	Logger *slog.Logger
	// MaxRequestBytes is the largest request frame accepted; a larger one
	// closes the connection. Default 100 MiB.
	MaxRequestBytes int32
	// TLS, when set, makes the listener TLS (SASL_SSL). Fetches then copy
	// record bytes through user space instead of sendfile.
	TLS *tls.Config
	// DevTenant, when set, serves unauthenticated connections as an admin
	// of this tenant. Only for `tenantd dev`: the listener and every
	// client must be on loopback. Off unless set.
	DevTenant string
	// AuthTimeout bounds how long a connection may take to authenticate.
	// Default 10 s.
	AuthTimeout time.Duration
	// MaxUnauthenticatedPerIP bounds the connections one client address may
	// hold open before they authenticate; a connection over it waits for a
	// place, unread, for at most AuthTimeout (preauth.go). Authenticated
	// connections do not count (their tenant's max_connections bounds
	// them). Default 32; negative: no bound.
	MaxUnauthenticatedPerIP int
	// MaxWaitingPerIP bounds the connections of one client address that
	// wait for a place among its unauthenticated ones; the next is closed
	// at once. Default 256; negative: none waits.
	MaxWaitingPerIP int
	// IdleTimeout closes an authenticated connection that sends nothing for
	// this long (Kafka's connections.max.idle.ms). Default 10 min.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 30 s.
	WriteTimeout time.Duration
	// MaxFetchWait caps a Fetch request's MaxWaitMillis. Default 30 s.
	MaxFetchWait time.Duration
	// MaxEgressWait bounds how long a Fetch waits for its turn in the
	// Admission's egress budget beyond its own MaxWaitMillis; a fetch not
	// granted by then is answered without records (the client fetches the
	// same offsets again). Default 5 s, inside the request timeouts of
	// common clients (franz-go: MaxWait + 10 s; Java: 30 s).
	MaxEgressWait time.Duration
	// RecheckEvery is how often open connections' keys are re-checked for
	// expiry, besides on every state change. Default 1 s.
	RecheckEvery time.Duration
	// UnknownTopicWait bounds how long a Metadata request that names a
	// topic this broker's cell state does not hold yet waits for the state
	// to bring it (metadatawait.go). Default 250 ms: franz-go asks again
	// that long after an unknown topic, so a topic just created answers on
	// the first try instead, and one that does not exist costs a client
	// about one of its own retry waits more.
	UnknownTopicWait time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Admission, when set, enforces tenant isolation: throughput quotas
	// (throttle_time_ms and muted connections), fair egress for fetches,
	// disk watermarks and per-tenant limits. Unset, nothing is limited.
	Admission *admission.Admission
	// Metrics, when set, gets the listener's request metrics (metrics.go):
	// per Kafka API and tenant, the tenants bounded by TenantLabels (nil:
	// the TopTenants busiest of this listener).
	Metrics      prometheus.Registerer
	TenantLabels *toptenants.Labels
	// Usage meters what produces append and fetches send (nil: none).
	Usage *usage.Meter

	// beforeFetchWrite, set by tests only (export_test.go), runs between
	// a fetch response's computing and its writing: the fault-injection
	// point of the metering tests.
	beforeFetchWrite func(net.Conn)
}

// DefaultMaxRequestBytes is the default of Config.MaxRequestBytes.
const DefaultMaxRequestBytes = 100 << 20

// maxUnauthenticatedBytes caps frames before authentication, so that an
// anonymous peer cannot make the broker buffer large requests.
const maxUnauthenticatedBytes = 64 << 10

func (c *Config) validate() error {
	if c.Listener == nil && c.Addr == "" {
		return errors.New("kafka config: Addr or Listener is required")
	}
	if c.NodeID < 1 {
		return fmt.Errorf("kafka config: NodeID must be at least 1, got %d", c.NodeID)
	}
	if c.State == nil {
		return errors.New("kafka config: State is required")
	}
	if c.Partitions == nil {
		return errors.New("kafka config: Partitions is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, DefaultMaxRequestBytes)
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("kafka config: MaxRequestBytes must be at least 1024, got %d", c.MaxRequestBytes)
	}
	if c.DevTenant != "" && c.TLS != nil {
		return errors.New("kafka config: DevTenant is for plaintext loopback listeners only; unset TLS")
	}
	for _, d := range []*time.Duration{&c.AuthTimeout, &c.IdleTimeout, &c.WriteTimeout, &c.MaxFetchWait, &c.MaxEgressWait, &c.RecheckEvery, &c.UnknownTopicWait} {
		if *d < 0 {
			return errors.New("kafka config: timeouts must not be negative")
		}
	}
	c.AuthTimeout = cmp.Or(c.AuthTimeout, 10*time.Second)
	c.MaxUnauthenticatedPerIP = cmp.Or(c.MaxUnauthenticatedPerIP, 32)
	c.MaxWaitingPerIP = cmp.Or(c.MaxWaitingPerIP, 256)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 10*time.Minute)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 30*time.Second)
	c.MaxFetchWait = cmp.Or(c.MaxFetchWait, 30*time.Second)
	c.MaxEgressWait = cmp.Or(c.MaxEgressWait, 5*time.Second)
	c.RecheckEvery = cmp.Or(c.RecheckEvery, time.Second)
	c.UnknownTopicWait = cmp.Or(c.UnknownTopicWait, 250*time.Millisecond)
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := c.HomeLimits.Fill(); err != nil {
		return fmt.Errorf("kafka config: %w", err)
	}
	return nil
}

// Server is a broker's Kafka listener.
type Server struct {
	cfg    Config
	ln     net.Listener
	ctx    context.Context // ends at Close; bounds every wait of a request
	cancel context.CancelFunc
	wg     sync.WaitGroup
	homes  *homeCache      // nil without Config.Homes
	rm     *requestMetrics // nil without Config.Metrics

	// mu guards the fields below.
	mu      sync.Mutex
	closed  bool
	serving bool
	conns   map[*conn]struct{}

	preAuth *preAuthPlaces // unauthenticated connections by client address
}

// New checks cfg and starts listening; Serve accepts connections.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen for kafka clients: %w", err)
		}
	}
	if cfg.DevTenant != "" && !isLoopback(ln.Addr()) {
		ln.Close()
		return nil, fmt.Errorf("kafka config: DevTenant needs a loopback listener, not %s", ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ln: ln, ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{},
		preAuth: newPreAuthPlaces(cfg.MaxUnauthenticatedPerIP, cfg.MaxWaitingPerIP)}
	if cfg.Homes != nil {
		s.homes = newHomeCache(cfg.Homes, cfg.HomeLimits, cfg.Now)
	}
	if cfg.Metrics != nil {
		labels := cfg.TenantLabels
		if labels == nil {
			labels = toptenants.New(TopTenants, 10*time.Second, cfg.Now)
		}
		rm, err := newRequestMetrics(cfg.Metrics, labels)
		if err == nil {
			err = cfg.Metrics.Register(connectionsCollector{s: s, labels: labels})
		}
		if err != nil {
			ln.Close()
			cancel()
			return nil, fmt.Errorf("kafka metrics: %w", err)
		}
		s.rm = rm
	}
	return s, nil
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until ctx ends or Close is called, then closes
// the server and returns nil. It may be called once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || s.serving {
		s.mu.Unlock()
		return errors.New("kafka: server closed or already serving")
	}
	s.serving = true
	s.wg.Add(2)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.watchKeys()
	}()
	unhook := context.AfterFunc(ctx, func() { s.stop() })
	defer unhook()
	defer s.wg.Done()
	s.cfg.Logger.Info("kafka listener serving", "addr", s.ln.Addr().String(), "node", s.cfg.NodeID, "tls", s.cfg.TLS != nil, "dev_tenant", s.cfg.DevTenant != "")
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				s.stop()
				return fmt.Errorf("accept kafka connection: %w", err)
			}
			// Anything else (out of file descriptors, an aborted
			// handshake) passes: back off and keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Logger.Warn("accept kafka connection", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) {
	if s.cfg.TLS != nil {
		nc = tls.Server(nc, s.cfg.TLS)
	}
	c := newConn(s, nc)
	host, wait := "", false
	if c.principal.Load() == nil {
		host = hostOf(c.remote)
		var placed bool
		if placed, wait = s.preAuth.admit(c, host); !placed && !wait {
			s.cfg.Logger.Info("kafka connection refused: too many unauthenticated connections from its address",
				"remote", c.remote, "limit", s.cfg.MaxUnauthenticatedPerIP, "waiting", s.cfg.MaxWaitingPerIP)
			nc.Close()
			return
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if wait {
			s.preAuth.abandon(host)
		}
		s.preAuth.give(c)
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.preAuth.give(c)
		}()
		if wait && !s.preAuth.await(s.ctx, c, host, s.cfg.AuthTimeout) {
			s.cfg.Logger.Info("kafka connection closed: no place among its address's unauthenticated connections within the auth timeout",
				"remote", c.remote, "limit", s.cfg.MaxUnauthenticatedPerIP, "auth_timeout", s.cfg.AuthTimeout)
			nc.Close()
			return
		}
		c.serve()
	}()
}

// Close stops accepting, closes every connection and waits for every
// goroutine the server started. It is idempotent.
func (s *Server) Close() error {
	err := s.stop()
	s.wg.Wait()
	return err
}

// stop closes the listener and every connection without waiting; the
// first call does the work.
func (s *Server) stop() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.ln.Close()
	for _, c := range conns {
		c.nc.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// watchKeys closes the connections whose API key was revoked, expired or
// whose tenant was suspended: at every state change, and every
// RecheckEvery for expiry.
func (s *Server) watchKeys() {
	t := time.NewTicker(s.cfg.RecheckEvery)
	defer t.Stop()
	for {
		changed := s.cfg.State.Changed()
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		v, now := s.cfg.State.View(), s.cfg.Now()
		s.mu.Lock()
		for c := range s.conns {
			// Redirect sessions re-check their key with each request; a
			// session holding a produce for its tenant's switch becomes
			// one (or closes on its next request).
			p := c.principal.Load()
			if p == nil || c.dev || c.redirected.Load() || c.holding.Load() {
				continue
			}
			if v.Valid(p, now) {
				c.homeChecked.Store(false)
				continue
			}
			s.closeUnlessMoved(c, p)
		}
		s.mu.Unlock()
	}
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
