package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/pgtest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/migrations"
)

func TestDebugAndBootstrapFlags(t *testing.T) {
	cfg, err := loadConfig("broker", []string{"-cell", "c", "-broker-id", "b", "-api", "http://x", "-cell-key", "k:s", "-debug-listen", "127.0.0.1:6060", peerArgs[0], peerArgs[1], peerArgs[2], peerArgs[3], peerArgs[4], peerArgs[5]}, func(string) string { return "" })
	if err != nil || cfg.DebugListen != "127.0.0.1:6060" || brokerConfigOf(cfg).DebugListen != "127.0.0.1:6060" {
		t.Fatalf("broker -debug-listen: %+v %v", cfg, err)
	}
	if _, err := loadConfig("broker", []string{"-cell", "c", "-broker-id", "b", "-api", "http://x", "-cell-key", "k:s", "-debug-listen", "6060", peerArgs[0], peerArgs[1], peerArgs[2], peerArgs[3], peerArgs[4], peerArgs[5]}, func(string) string { return "" }); err == nil {
		t.Fatal("no error for a -debug-listen without a host")
	}
	cfg, err = loadConfig("migrate", []string{"-database-url", "postgres://x", "-operator-key-file", "/tmp/k"}, func(string) string { return "" })
	if err != nil || cfg.OperatorKeyFile != "/tmp/k" {
		t.Fatalf("migrate -operator-key-file: %+v %v", cfg, err)
	}
}

// The pprof endpoint answers with the profile index, on its own listener.
func TestServeDebug(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveDebug(ctx, addr, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveDebug: %v", err)
		}
	}()
	var body []byte
	celltest.WaitFor(t, 10*time.Second, "pprof served", func() bool {
		resp, err := http.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			return false
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return true
	})
	if !strings.Contains(string(body), "goroutine") {
		t.Fatalf("pprof index: %.200s", body)
	}
}

// bootstrapOperatorKey writes a key the API accepts as an operator's, and
// refuses to overwrite a file that exists.
func TestBootstrapOperatorKey(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	ctx := context.Background()
	pool, err := openDB(ctx, pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "operator-key")
	if err := bootstrapOperatorKey(ctx, pool, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok {
		t.Fatalf("key file: %q", b)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveControlPlane(sctx, pool, slog.New(slog.DiscardHandler), ln, nil, nil, nil, nil) }()
	defer func() { cancel(); <-served }()
	me, err := client.New(selfURL(ln, "http"), client.WithAPIKey(id, secret)).Me(ctx)
	if err != nil || !me.Operator {
		t.Fatalf("the bootstrapped key is not an operator's: %+v %v", me, err)
	}
	if err := bootstrapOperatorKey(ctx, pool, file); err == nil {
		t.Fatal("no error when the key file exists")
	}
	if b2, _ := os.ReadFile(file); string(b2) != string(b) {
		t.Fatal("the existing key file was changed")
	}
}
