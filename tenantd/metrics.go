package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// runBrokerRole runs `tenantd broker`: the broker, and its Prometheus
// metrics at /metrics on -metrics-listen when that is set.
func runBrokerRole(ctx context.Context, cfg Config, lt *listenerTLS, log *slog.Logger) error {
	gc, _ := cfg.gcSettings() // validated with the config
	applyGC(gc, os.Getenv, log)
	bc := brokerConfigOf(cfg)
	bc.TLS = lt
	if cfg.MetricsListen == "" {
		return runBroker(ctx, bc, log)
	}
	reg := brokerRegistry()
	bc.Metrics = reg
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsListen, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- serveMetrics(ctx, ln, reg, log)
		cancel()
	}()
	brokerErr := runBroker(ctx, bc, log)
	cancel()
	if metricsErr := <-served; metricsErr != nil && (brokerErr == nil || errors.Is(brokerErr, context.Canceled)) {
		return metricsErr // the metrics listener failing is what stopped the broker
	}
	return brokerErr
}

// devMetrics serves the dev brokers' metrics on addr (nothing when addr is
// empty) until ctx ends, in a goroutine wg waits for. The registerer it
// returns for a broker labels its series broker=<id>.
func devMetrics(ctx context.Context, addr string, wg *sync.WaitGroup, log *slog.Logger) (func(broker string) prometheus.Registerer, error) {
	if addr == "" {
		return func(string) prometheus.Registerer { return nil }, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	reg := brokerRegistry()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := serveMetrics(ctx, ln, reg, log); err != nil {
			log.Error("dev metrics stopped", "err", err)
		}
	}()
	return func(broker string) prometheus.Registerer { return wrapBroker(reg, broker) }, nil
}

// wrapBroker labels the series a broker registers on reg with its id.
func wrapBroker(reg prometheus.Registerer, broker string) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"broker": broker}, reg)
}

// serveMetrics serves reg's metrics at /metrics on ln until ctx ends.
func serveMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Info("metrics listening", "metrics_listen", ln.Addr().String())
	return serveHTTP(ctx, ln, mux, log, nil)
}

// brokerRegistry is a broker process's own Prometheus registry, with the Go
// and process collectors and the process's Raft timings (raftmetrics.go).
func brokerRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), raftTimingHistograms())
	return reg
}
