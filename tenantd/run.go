package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/console"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/migrations"
)

// run wires and runs one role until ctx is cancelled.
func run(ctx context.Context, cmd string, cfg Config) error {
	log := newLogger(os.Stderr, cfg.LogLevel)
	if cmd == "dev" && cfg.DevTLS {
		if err := devTLSFiles(&cfg); err != nil {
			return err
		}
	}
	lt, err := loadListenerTLS(cfg)
	if err != nil {
		return err
	}
	if lt.enabled() {
		defer reloadOnHangup("listener certificate", cfg.TLSCertFile, lt.reload, log)()
	}
	switch cmd {
	case "migrate":
		pool, err := openDB(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		applied, err := migrations.Up(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Printf("applied %d migrations %v\n", len(applied), applied)
		if cfg.OperatorKeyFile != "" {
			return bootstrapOperatorKey(ctx, pool, cfg.OperatorKeyFile)
		}
		return nil
	case "controlplane":
		pool, err := openMigratedDB(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		mailer, err := newMailer(cfg.MailDir, log)
		if err != nil {
			return err
		}
		defer startBillingWorker(ctx, pool, cfg, log)()
		var rateRedis redis.UniversalClient
		if cfg.RateLimitRedis != "" {
			rdb := redis.NewClient(&redis.Options{Addr: cfg.RateLimitRedis, DialTimeout: 250 * time.Millisecond, MaxRetries: -1})
			defer rdb.Close()
			rateRedis = rdb
		}
		return serveControlPlane(ctx, pool, log, ln, lt, mailer, rateRedis, func() {
			log.Info("control plane ready", "url", lt.scheme()+"://"+ln.Addr().String())
		})
	case "dev":
		return dev(ctx, cfg, lt, log)
	case "broker":
		return runBrokerRole(ctx, cfg, lt, log)
	case "billing":
		return runBillingRole(ctx, cfg, log)
	}
	return fmt.Errorf("unknown role %q", cmd)
}

// newMailer is the control plane's mailer: the log (no mail is sent: the
// project has no real mailer; production plugs one into
// controlplane.Config.Mailer), and with dir also a file per message there.
func newMailer(dir string, log *slog.Logger) (mail.Mailer, error) {
	if dir == "" {
		return mail.Log{Logger: log}, nil
	}
	return mail.NewDir(dir, log)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level) // validated with the config
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// minPoolConns is the least maximum a process's connection pool gets
// unless the database URL sets pool_max_conns. pgx's default is the CPU
// count, at least 4; a control plane serves every broker's reports, each
// a transaction that may wait for a tenant move's row lock while it holds
// its connection, and operators' requests beside them, so on a 2-core
// machine four could all be held by waiting reports.
const minPoolConns = 16

// poolConfig parses url and raises its pool's maximum to minPoolConns
// when the URL does not set pool_max_conns.
func poolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, minPoolConns)
	}
	return cfg, nil
}

func openDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// sleep waits d, or less when ctx ends first, and then returns ctx's
// error: the pause between the rounds of a -watch or a retry, which must
// not keep a stopped command waiting.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// openMigratedDB is openDB with the schema brought up to date, what the
// roles that serve from the database (controlplane, billing) need before
// they start; the pool is closed again if the migrations fail.
func openMigratedDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := openDB(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// serveControlPlane serves the API on ln until ctx ends, over TLS when lt
// has a certificate. ready runs once the listener accepts requests.
func serveControlPlane(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, ln net.Listener, lt *listenerTLS,
	mailer mail.Mailer, rateRedis redis.UniversalClient, ready func()) error {
	h, err := controlPlaneHandler(pool, log, selfURL(ln, lt.scheme()), lt.httpClient(), nil, mailer, rateRedis)
	if err != nil {
		return err
	}
	if lt.enabled() {
		ln = tls.NewListener(ln, lt.server())
	}
	return serveHTTP(ctx, ln, h, log, ready)
}

// selfURL is how the process reaches its own HTTP listener (scheme http or
// https): the console calls the API through it, as any client would.
func selfURL(ln net.Listener, scheme string) string {
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// controlPlaneHandler serves the API under /v1/ and /internal/, the console
// at /, and the process's Prometheus metrics to platform operators (an
// operator API key or session; -metrics-listen serves them unauthenticated
// on a separate, private address instead). The console reaches the API at
// apiURL with hc (which trusts the listener's CA when it serves TLS).
// reg, when set, is the registry to serve (dev mode's brokers
// register on it too); nil means a new one. mailer sends the control
// plane's mail; nil logs it (mail.Log). rateRedis, when set, holds the
// rate limits shared by every control plane on it; nil keeps them in
// this process.
func controlPlaneHandler(pool *pgxpool.Pool, log *slog.Logger, apiURL string, hc *http.Client, reg *prometheus.Registry,
	mailer mail.Mailer, rateRedis redis.UniversalClient) (http.Handler, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The console tags sign-ins with the browser's address under a secret
	// only this process knows, so the API limits them per browser.
	consoleSecret := make([]byte, 32)
	if _, err := rand.Read(consoleSecret); err != nil {
		return nil, fmt.Errorf("generate console secret: %w", err)
	}
	cp, err := controlplane.New(controlplane.Config{DB: pool, Logger: log, Registerer: reg,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ConsoleSecret: consoleSecret, Mailer: mailer,
		RateLimitRedis: rateRedis})
	if err != nil {
		return nil, err
	}
	ui, err := console.New(console.Config{APIURL: apiURL, HTTPClient: hc, Logger: log, ConsoleSecret: consoleSecret})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", cp.Handler())
	mux.Handle("/internal/", cp.Handler())
	mux.Handle("/healthz", cp.Handler())
	mux.Handle("GET /metrics", cp.Handler()) // operators only: the series name tenants
	mux.Handle("/", ui)
	return mux, nil
}

// serveHTTP answers on ln until ctx is cancelled, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, ready func()) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}
