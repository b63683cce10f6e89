package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// runBillingRole is `tenantd billing`: the billing worker as a process of
// its own, over the control plane's Postgres (the same -database-url,
// SLUICE_DATABASE_URL), with the Stripe key from SLUICE_STRIPE_KEY. Like
// the control plane it applies pending migrations first (under their
// lock). With -health-listen it serves
//
//	GET /livez   200 while the process runs
//	GET /readyz  200 while its rounds reach the database (503 with the
//	             reason before the first round and after one that could
//	             not); Stripe's failures do not count: they are retried
//	             with backoff, and seen in the metrics and the log
//
// and with -metrics-listen its Prometheus metrics at /metrics; both are
// unauthenticated and say nothing about tenants: bind them privately.
func runBillingRole(ctx context.Context, cfg Config, log *slog.Logger) error {
	pool, err := openMigratedDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w := newBillingWorker(pool, cfg, log, newBillingMetrics(reg))

	// Listeners first, so that a busy address fails the start.
	type server struct {
		ln net.Listener
		h  http.Handler
	}
	var servers []server
	defer func() {
		for _, s := range servers {
			s.ln.Close()
		}
	}()
	listen := func(addr string, h http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		servers = append(servers, server{ln, h})
		return nil
	}
	if cfg.HealthListen != "" {
		if err := listen(cfg.HealthListen, billingHealth(w)); err != nil {
			return err
		}
	}
	if cfg.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err := listen(cfg.MetricsListen, mux); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- serveHTTP(ctx, s.ln, s.h, log, nil) }()
	}
	stop := w.start(ctx)
	log.Info("billing worker running", "interval", w.interval.String(), "stripe", w.reporter != nil,
		"health", cfg.HealthListen, "metrics", cfg.MetricsListen)
	pending := len(servers)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc: // a listener failed: stop the rest
		pending--
	}
	cancel()
	stop()
	for ; pending > 0; pending-- {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	servers = nil // serveHTTP closed them
	return first
}

// billingHealth serves the billing role's /livez and /readyz.
func billingHealth(w *billingWorker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"status":"alive"}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		body := map[string]string{"status": "ready"}
		if !w.ready.Load() {
			rw.WriteHeader(http.StatusServiceUnavailable)
			body = map[string]string{"status": "not ready", "reason": "no billing round has reached the database yet, or the last one could not (see the log)"}
		}
		_ = json.NewEncoder(rw).Encode(body)
	})
	return mux
}

// billingMetrics are the billing role's series; nil-safe.
type billingMetrics struct {
	rounds *prometheus.CounterVec
	events prometheus.Counter
}

func newBillingMetrics(reg prometheus.Registerer) *billingMetrics {
	m := &billingMetrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_billing_rounds_total",
			Help: "Billing worker rounds by result: worked (held the lock and reported), standby (another worker held it), ledger_only (no Stripe key), failed."},
			[]string{"result"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_billing_meter_events_sent_total",
			Help: "Stripe meter events this worker sent and recorded as sent."}),
	}
	for _, r := range []string{"worked", "standby", "ledger_only", "failed"} {
		m.rounds.WithLabelValues(r)
	}
	reg.MustRegister(m.rounds, m.events)
	return m
}

func (m *billingMetrics) round(result string) {
	if m != nil {
		m.rounds.WithLabelValues(result).Inc()
	}
}

func (m *billingMetrics) sent(n int) {
	if m != nil && n > 0 {
		m.events.Add(float64(n))
	}
}
