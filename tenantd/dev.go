package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/migrations"
)

// The dev fleet's shared cell: three brokers on loopback (devcells.go adds
// the dedicated pool's cell).
var devBrokers = []api.CreateBrokerRequest{
	{ID: "dev-b1", CellID: "dev-cell-1", NodeID: 1, KafkaAddr: "127.0.0.1:9092", HTTPAddr: "127.0.0.1:8091", RaftAddr: "127.0.0.1:7001"},
	{ID: "dev-b2", CellID: "dev-cell-1", NodeID: 2, KafkaAddr: "127.0.0.1:9093", HTTPAddr: "127.0.0.1:8092", RaftAddr: "127.0.0.1:7002"},
	{ID: "dev-b3", CellID: "dev-cell-1", NodeID: 3, KafkaAddr: "127.0.0.1:9094", HTTPAddr: "127.0.0.1:8093", RaftAddr: "127.0.0.1:7003"},
}

// devRaftListen and devKafkaListen are the first dev broker's Raft and
// Kafka addresses; the others take the next ports (devBrokers lists the same).
const (
	devRaftListen  = "127.0.0.1:7001"
	devKafkaListen = "127.0.0.1:9092"
	devHTTPListen  = "127.0.0.1:8091"
)

// devAddrs returns n dev brokers' addresses of one kind: from first (or
// def) on, one port apart (the shared cell's brokers first, then the
// dedicated cell's), or free ports of first's host when its port is 0
// (reserved by listening, for tests that run next to another tenantd).
// release(i) gives up address i's reservation, just before its broker
// listens: released any earlier, while the other brokers start, a port
// was taken by another test's connection and the broker could not bind
// it. release(-1) gives up those still held.
func devAddrs(first, def string, n int) (addrs []string, release func(i int), err error) {
	if first == "" {
		first = def
	}
	host, portStr, err := net.SplitHostPort(first)
	if err != nil {
		return nil, nil, fmt.Errorf("dev address %q: %w", first, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, nil, fmt.Errorf("dev address %q: bad port", first)
	}
	addrs = make([]string, n)
	held := make([]net.Listener, n)
	release = func(i int) {
		for j, ln := range held {
			if ln != nil && (i < 0 || i == j) {
				ln.Close()
				held[j] = nil
			}
		}
	}
	for i := range addrs {
		if port != 0 {
			addrs[i] = net.JoinHostPort(host, strconv.Itoa(port+i))
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			release(-1)
			return nil, nil, fmt.Errorf("pick a dev port: %w", err)
		}
		addrs[i], held[i] = ln.Addr().String(), ln
	}
	return addrs, release, nil
}

// dev runs the control plane on a local Postgres and prints how to use it.
func dev(ctx context.Context, cfg Config, lt *listenerTLS, log *slog.Logger) error {
	dbURL, stopPG, err := devPostgres(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopPG()
	pool, err := openDB(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	// No mail is sent in dev: the tour and the tests read it from here.
	mailDir := cfg.MailDir
	if mailDir == "" {
		mailDir = filepath.Join(cfg.DataDir, "mail")
	}
	mailer, err := newMailer(mailDir, log)
	if err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		return err
	}
	defer startBillingWorker(ctx, pool, cfg, log)()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (is another tenantd running? set -listen): %w", cfg.Listen, err)
	}
	apiURL := selfURL(ln, lt.scheme())
	keyFile := filepath.Join(cfg.DataDir, "operator-key")

	reg := prometheus.NewRegistry() // the control plane's and the dev brokers' metrics
	reg.MustRegister(raftTimingHistograms())
	var readyErr error
	var brokers sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		brokers.Wait()
	}()
	ready := func() {
		id, secret, err := devOperatorKey(ctx, pool, apiURL, lt.httpClient(), keyFile)
		if err != nil {
			readyErr = err
			return
		}
		op := client.New(apiURL, client.WithAPIKey(id, secret), client.WithHTTPClient(lt.httpClient()))
		cells := devCellsOf(cfg)
		n := devFleetBrokers(cells)
		raftAddrs, releaseRaft, err := devAddrs(cfg.RaftListen, devRaftListen, n)
		if err != nil {
			readyErr = err
			return
		}
		defer releaseRaft(-1)
		kafkaAddrs, releaseKafka, err := devAddrs(cfg.KafkaListen, devKafkaListen, n)
		if err != nil {
			readyErr = err
			return
		}
		defer releaseKafka(-1)
		httpAddrs, releaseHTTP, err := devAddrs(cfg.HTTPListen, devHTTPListen, n)
		if err != nil {
			readyErr = err
			return
		}
		defer releaseHTTP(-1)
		started := 0 // brokers started so far, over every cell: the index of their addresses
		release := func(i int) { releaseRaft(i); releaseKafka(i); releaseHTTP(i) }
		metrics, err := devMetrics(sctx, cfg.MetricsListen, &brokers, log)
		if err != nil {
			readyErr = err
			return
		}
		// Each cell takes the next len(Brokers) addresses of each kind.
		var cellKafka, cellHTTP [][]string
		served := make([][]*brokerParts, len(cells))
		for ci, c := range cells {
			k := len(c.Brokers)
			rAddrs, kAddrs, hAddrs := raftAddrs[:k], kafkaAddrs[:k], httpAddrs[:k]
			raftAddrs, kafkaAddrs, httpAddrs = raftAddrs[k:], kafkaAddrs[k:], httpAddrs[k:]
			cellKafka, cellHTTP = append(cellKafka, kAddrs), append(cellHTTP, hAddrs)
			if err := c.seed(ctx, op, rAddrs, kAddrs, hAddrs); err != nil {
				readyErr = err
				return
			}
			cellKey, err := c.cellKey(ctx, op, cfg.DataDir)
			if err != nil {
				readyErr = err
				return
			}
			peers, err := c.peerCerts(cfg.DataDir)
			if err != nil {
				readyErr = err
				return
			}
			parts := make([]*brokerParts, len(c.Brokers))
			for i, b := range c.Brokers {
				parts[i] = newBrokerParts()
				bc := brokerConfig{parts: parts[i], Cell: b.CellID, BrokerID: b.ID, APIURL: apiURL, CellKeyID: cellKey.ID,
					CellKeySecret: cellKey.Secret, DataDir: filepath.Join(cfg.DataDir, b.ID),
					Peer: peers[string(replicas.ServerID(b.NodeID))], TLS: lt, SeedRate: cfg.SeedRate, MirrorRate: cfg.MirrorRate,
					UsageSample: cfg.usageSample(), CompactInterval: cfg.CompactInterval,
					Register: devRegistration(b, rAddrs[i], kAddrs[i], hAddrs[i])}
				bc.Metrics = metrics(b.ID)
				if bc.Metrics == nil {
					bc.Metrics = wrapBroker(reg, b.ID)
				}
				bc.Isolation = brokerConfigOf(cfg).Isolation
				release(started)
				started++
				brokers.Add(1)
				go func() {
					defer brokers.Done()
					if err := runBroker(sctx, bc, log); err != nil {
						log.Error("dev broker stopped", "broker", bc.BrokerID, "err", err)
					}
				}()
			}
			served[ci] = parts
		}
		// Every cell serves groups before the banner: a tenant moved to
		// the dedicated cell takes its groups' offsets there.
		for ci, c := range cells {
			if err := devGroupsServed(sctx, c.ID, served[ci], groups.DefaultPartitions, devReadyWait); err != nil {
				if sctx.Err() == nil {
					readyErr = err
				}
				return
			}
		}
		fmt.Printf(`
Sluice is running.
  Console:   %[1]s/
             operators sign in at %[1]s/login?as=operator with the operator key as id:secret: %[2]s:%[3]s
  API:       %[1]s/v1   (OpenAPI: %[1]s/v1/openapi.json)
  Cell:      %[5]s with brokers %[6]s (Kafka on %[7]s, SASL/PLAIN with an API key; partitions replicate over Raft)
  HTTP data: %[8]s (HTTP basic with an API key; see the README's tour)
%[11]s  Operator:  export SLUICE_ENDPOINT=%[1]s SLUICE_API_KEY_ID=%[2]s SLUICE_API_KEY_SECRET=%[3]s
             then e.g.: tenantd admin tenants list
  Postgres:  %[4]s
  Mail:      none is sent (no mailer): each message is logged and written to %[10]s
%[9]sPress Ctrl-C to stop.
`, apiURL, id, secret, redactURL(dbURL), cells[0].ID, cells[0].brokerIDs(), strings.Join(cellKafka[0], ","), strings.Join(cellHTTP[0], ","),
			devTLSBanner(lt, cfg.TLSCAFile, cellKafka[0][0], cellHTTP[0][0]), mailDir, devDedicatedBanner(cells, cellKafka, cellHTTP))
	}
	h, err := controlPlaneHandler(pool, log, apiURL, lt.httpClient(), reg, mailer, nil)
	if err != nil {
		return err
	}
	if lt.enabled() {
		ln = tls.NewListener(ln, lt.server())
	}
	err = serveHTTP(sctx, ln, h, log, func() {
		ready()
		if readyErr != nil {
			cancel()
		}
	})
	if readyErr != nil {
		return readyErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// devReadyWait bounds how long dev waits for its cell to serve consumer
// groups before it gives up (devGroupsServed): on an idle machine the
// offsets partitions elect and load within a second or two of the brokers
// starting.
const devReadyWait = time.Minute

// devGroupsServed waits, at most wait, until each of a dev cell's n
// offsets partitions is served by one of its brokers' group coordinators
// (the broker leads the partition and has loaded it), so that the banner
// never precedes a README user's first group join, which would otherwise
// get a retriable 503 while a partition still elects or loads. parts are
// the brokers'; their coordinators appear as the brokers start.
func devGroupsServed(ctx context.Context, cell string, parts []*brokerParts, n int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var unserved []string
		for p := range int32(n) {
			if !slices.ContainsFunc(parts, func(bp *brokerParts) bool {
				c := bp.coord.Load()
				return c != nil && c.Loaded(p)
			}) {
				unserved = append(unserved, strconv.Itoa(int(p)))
			}
		}
		if len(unserved) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dev cell %s not ready after %s: offsets partitions %s (of %d) have no leader serving consumer groups yet, "+
				"so group joins would fail; the brokers' log above says why (on a very busy machine, try again when it is quieter)",
				cell, wait, strings.Join(unserved, ", "), n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the dev cell to serve groups: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// devTLSBanner tells how to reach the dev listeners over TLS: which CA
// file to trust and the kcat and curl flags that do; empty when they serve
// plaintext.
func devTLSBanner(lt *listenerTLS, caFile, kafkaAddr, httpAddr string) string {
	if !lt.enabled() {
		return ""
	}
	return fmt.Sprintf(`  TLS:       every listener (Kafka SASL_SSL, HTTPS); trust the CA %[1]s
             kcat -b %[2]s -X security.protocol=SASL_SSL -X ssl.ca.location=%[1]s -X sasl.mechanisms=PLAIN -X sasl.username=<key id> -X sasl.password=<secret> -L
             curl --cacert %[1]s -u <key id>:<secret> https://%[3]s/v1/topics/<topic>/partitions/0/messages?offset=0
             SLUICE_TLS_CA_FILE=%[1]s for tenantd admin; kill -HUP <pid> reloads the certificate
`, caFile, kafkaAddr, httpAddr)
}

// devOperatorKey reuses the operator key saved in keyFile while it still
// works, or makes and saves a new one.
func devOperatorKey(ctx context.Context, pool *pgxpool.Pool, apiURL string, hc *http.Client, keyFile string) (string, string, error) {
	if b, err := os.ReadFile(keyFile); err == nil {
		if id, secret, ok := strings.Cut(strings.TrimSpace(string(b)), ":"); ok {
			if me, err := client.New(apiURL, client.WithAPIKey(id, secret), client.WithHTTPClient(hc)).Me(ctx); err == nil && me.Operator {
				return id, secret, nil
			}
		}
	}
	id, secret, err := controlplane.CreateOperatorKey(ctx, pool, "tenantd dev")
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, []byte(id+":"+secret+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("save operator key: %w", err)
	}
	return id, secret, nil
}

func redactURL(u string) string {
	if i := strings.Index(u, "@"); i > 0 {
		if j := strings.Index(u, "://"); j > 0 && j < i {
			if k := strings.Index(u[j+3:i], ":"); k >= 0 {
				return u[:j+3+k] + ":***" + u[i:]
			}
		}
	}
	return u
}
