package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/controlplane"
)

// serveDebug serves Go's runtime profiles (/debug/pprof/) on addr until ctx
// ends. The handlers are registered on a mux of their own, never on
// http.DefaultServeMux, so no other listener exposes them.
func serveDebug(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for pprof on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof listening", "debug_listen", ln.Addr().String())
	return serveHTTP(ctx, ln, mux, log, nil)
}

// bootstrapOperatorKey creates the first operator key of a deployment and
// writes it to file as id:secret. It refuses to overwrite an existing file,
// so a rerun cannot silently replace a key someone saved.
func bootstrapOperatorKey(ctx context.Context, pool *pgxpool.Pool, file string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create operator key file: %w", err)
	}
	id, secret, err := controlplane.CreateOperatorKey(ctx, pool, "tenantd migrate")
	if err == nil {
		_, err = fmt.Fprintf(f, "%s:%s\n", id, secret)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return fmt.Errorf("bootstrap operator key: %w", err)
	}
	fmt.Printf("operator key written to %s\n", file)
	return nil
}
