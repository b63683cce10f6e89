package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/dataplane/replicas"
)

// Config is tenantd's configuration, layered: defaults, then a JSON file
// (-config), then SLUICE_* environment variables, then flags.
type Config struct {
	// DatabaseURL is the control plane's Postgres. In dev mode an empty URL
	// means: use the server on 127.0.0.1:5432 if one answers, else start a
	// private one under DataDir.
	DatabaseURL string `json:"database_url"`
	// Listen is the control plane's HTTP address.
	Listen string `json:"listen"`
	// DataDir is, for dev, its state (a private Postgres cluster, keys,
	// certificates, each dev broker's data in a directory of its own);
	// for a broker, its data: cell-state.json and replicas/ directly in it.
	DataDir string `json:"data_dir"`
	// LogLevel is debug, info, warn or error; default info, and warn for
	// dev, whose console then shows its banner and warnings, not every
	// replica's lifecycle line (-log-level info brings them back).
	LogLevel string `json:"log_level"`
	// PrivatePostgres forces dev mode to start its own Postgres.
	PrivatePostgres bool `json:"private_postgres"`

	// Broker role: the cell and broker this process is, the control plane's
	// URL and the cell key (id:secret) it authenticates with.
	Cell     string `json:"cell"`
	BrokerID string `json:"broker_id"`
	APIURL   string `json:"api_url"`
	CellKey  string `json:"cell_key"`
	// NodeID, when set, makes a broker register itself at start: the
	// control plane adds it to its cell with this node id, or updates the
	// addresses of the broker of that id, from KafkaAdvertise,
	// HTTPAdvertise and RaftAdvertise. SLUICE_POD_INDEX (a StatefulSet
	// pod's index, from 0) gives node id index+1 when it is unset.
	NodeID int `json:"node_id"`
	// KafkaAdvertise and HTTPAdvertise are the Kafka and HTTP data API
	// addresses a registering broker advertises (clients are told them).
	KafkaAdvertise string `json:"kafka_advertise"`
	HTTPAdvertise  string `json:"http_advertise"`
	// PeerCertDir is a directory as tenantd certs writes it: ca.pem and
	// node-<node id>.pem and node-<node id>-key.pem; it fills whichever
	// of PeerCAFile, PeerCertFile and PeerKeyFile are unset.
	PeerCertDir string `json:"peer_cert_dir"`
	// MetricsListen, when set, is where a broker serves its Prometheus
	// metrics (/metrics); in dev mode, those of all three dev brokers,
	// labelled broker="dev-b1" and so on (without it, dev serves them on
	// the control plane's /metrics, labelled the same way, which answers
	// operators only). It is unauthenticated: bind it to a private address.
	MetricsListen string `json:"metrics_listen"`
	// RaftListen is the broker's Raft transport listen address; default
	// its advertised address. In dev mode it is the first dev broker's
	// address, the others taking the next ports (port 0: free ports).
	RaftListen string `json:"raft_listen"`
	// RaftAdvertise is the Raft address peers dial; default the raft_addr
	// the cell state lists for this broker.
	RaftAdvertise string `json:"raft_advertise"`
	// PeerCAFile, PeerCertFile and PeerKeyFile are the PEM files the Raft
	// transport authenticates with (mutual TLS): the cell CA's certificate,
	// and this broker's certificate and key, issued by that CA for its
	// node id (tenantd certs makes them). Required for a broker; dev makes
	// its own under data_dir. SIGHUP reloads the certificate and key.
	PeerCAFile   string `json:"peer_ca_file"`
	PeerCertFile string `json:"peer_cert_file"`
	PeerKeyFile  string `json:"peer_key_file"`
	// TLSCertFile and TLSKeyFile are the PEM certificate and key every
	// client-facing listener of the process serves when set: the Kafka
	// listener then serves SASL_SSL, the HTTP data API and the control
	// plane with its console HTTPS. Unset, they serve plaintext (fine on
	// loopback, as make run does). SIGHUP reloads them.
	TLSCertFile string `json:"tls_cert_file"`
	TLSKeyFile  string `json:"tls_key_file"`
	// TLSCAFile is the PEM CA bundle the process trusts when it calls the
	// control plane's API (a broker; the console its own address) or
	// another broker (HTTP forwards); unset, the system's roots.
	TLSCAFile string `json:"tls_ca_file"`
	// DevTLS, for dev only: make a local CA and a certificate for
	// 127.0.0.1 and localhost under data_dir/tls and serve TLS on every
	// listener with them.
	DevTLS bool `json:"dev_tls"`
	// KafkaListen is the broker's Kafka listen address; default the
	// kafka_addr the cell state lists for this broker (which clients are
	// told in Metadata). In dev mode it is the first dev broker's address,
	// the others taking the next ports (port 0: free ports).
	KafkaListen string `json:"kafka_listen"`
	// HTTPListen is the broker's HTTP data API listen address; default
	// the http_addr the cell state lists for this broker. In dev mode it
	// is the first dev broker's address, the others taking the next ports
	// (port 0: free ports).
	HTTPListen string `json:"http_listen"`
	// DebugListen, when set, serves Go's runtime profiles (net/http/pprof)
	// on this address, for profiling a broker under load. Off by default:
	// the profiles are unauthenticated, so bind it to loopback.
	DebugListen string `json:"debug_listen"`
	// HealthListen, for a broker, serves GET /livez (the process runs)
	// and GET /readyz (it serves its replicas) for probes; off by default.
	HealthListen string `json:"health_listen"`

	// OperatorKeyFile, for migrate only: after the migrations, create a
	// platform-operator API key and write it there as id:secret (mode
	// 0600), for the first start of a deployment when no operator can yet
	// call the API. The file must not exist yet.
	OperatorKeyFile string `json:"operator_key_file"`
	// RedisAddr is the cell's Redis, through which brokers share tenants'
	// cell-wide quotas by demand (default 127.0.0.1:6379). Without it a
	// broker enforces an even share.
	RedisAddr string `json:"redis_addr"`
	// RateLimitRedis, for controlplane: a Redis (host:port) holding the
	// API's rate limits (sign-in, signup, tenant creation, key-home
	// lookups), shared by every control plane on it. Unset (the default),
	// each instance limits on its own; while Redis does not answer, each
	// falls back to its own limits.
	RateLimitRedis string `json:"ratelimit_redis"`
	// DiskSoftWatermark and DiskHardWatermark are the data disk's
	// watermarks as fractions (defaults 0.80 and 0.90).
	DiskSoftWatermark float64 `json:"disk_soft_watermark"`
	DiskHardWatermark float64 `json:"disk_hard_watermark"`
	// MailDir, for controlplane and dev: also keep every mail the control
	// plane sends (signup confirmations, the news signup keeps out of its
	// answers) as a file in this directory. The control plane has no real
	// mailer: it writes each message to its log (warn) and sends nothing;
	// production plugs a mailer into controlplane.Config.Mailer. Dev
	// defaults it to data_dir/mail, where the README's tour reads its token.
	MailDir string `json:"mail_dir"`
	// EgressBytesPerSec is each broker's fetch egress budget, beyond which
	// fetch responses queue for fair egress (default 256 MiB/s).
	EgressBytesPerSec int64 `json:"egress_bytes_per_sec"`
	// SeedRate bounds how fast a broker's replicas copy segment files
	// from peers when seeded (replicas.Config.SeedRate), in bytes a
	// second; 0 is unlimited (default 64 MiB/s).
	SeedRate int64 `json:"seed_rate"`
	// MirrorRate bounds each partition's pull on a destination broker of
	// a tenant move whose topic sets no rate (replicas.Config.MirrorRate),
	// in bytes a second; 0 is unlimited (default 8 MiB/s).
	MirrorRate  int64  `json:"mirror_rate"`
	UsageSample string `json:"usage_sample"`
	// BillingWorker, for controlplane and dev: run the billing worker
	// (ledger pruning, Stripe reporting) inside this process too. Default
	// true, so that dev, make run and a deployment without a billing role
	// bill; a deployment that runs `tenantd billing` sets it false on its
	// control planes. Any number of workers may run: one works at a time.
	BillingWorker bool `json:"billing_worker"`
	// DedicatedCell, for dev: also run the dedicated pool's cell
	// (dev-dedicated, dev-cell-2) that a tenant can be moved to. Default
	// true, so that make run shows a move; tests that need no second cell
	// set it false to start three brokers instead of six.
	DedicatedCell bool `json:"dedicated_cell"`
	// BillingInterval is how often a billing worker does a round, a Go
	// duration (default 30s).
	BillingInterval string `json:"billing_interval"`
	// StripeURL points the billing worker at another Stripe API address
	// (stripe-mock in tests). The secret key itself comes from the
	// environment only (SLUICE_STRIPE_KEY), never from the file.
	StripeURL string `json:"stripe_url"`
	StripeKey string `json:"-"`
	// CompactInterval is how often a broker's cleaner passes over the
	// replicas of compacted topics (replicas.Config.CompactInterval;
	// default 15 s). Flag only: short runs (cmd/chaos -compact) lower it.
	CompactInterval time.Duration `json:"-"`
	// Journal, for broker and dev: make the appends of all of a broker's
	// partitions durable through one write-ahead journal under data_dir
	// (dataplane/journal), one fdatasync a round, instead of one
	// fdatasync of each partition's segment a round. Default true.
	Journal bool `json:"journal"`
	// GCPercent and MemoryLimit, for a broker, set the Go garbage
	// collector (gc.go): the GC percent as GOGC takes it ("off" or 10 to
	// 10000; default 200, or GOGC when that is set) and a soft memory
	// limit as GOMEMLIMIT takes it (like 4GiB; default none, or
	// GOMEMLIMIT).
	GCPercent   string `json:"gc_percent"`
	MemoryLimit string `json:"memory_limit"`
}

// usageSample is UsageSample parsed (validate checked it); 0 for the
// sampler's default.
func (c Config) usageSample() time.Duration {
	d, _ := time.ParseDuration(c.UsageSample)
	return d
}

// billingInterval is BillingInterval parsed (validate checked it), or
// its default.
func (c Config) billingInterval() time.Duration {
	if d, err := time.ParseDuration(c.BillingInterval); err == nil {
		return d
	}
	return defaultBillingInterval
}

func defaultConfig() Config {
	return Config{Listen: "127.0.0.1:8080", DataDir: ".dev", RedisAddr: defaultRedisAddr, SeedRate: replicas.DefaultSeedRate,
		MirrorRate: replicas.DefaultMirrorRate, BillingWorker: true, DedicatedCell: true, Journal: true}
}

func (c *Config) validate(cmd string) error {
	if c.LogLevel == "" {
		c.LogLevel = "info"
		if cmd == "dev" {
			c.LogLevel = "warn"
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("listener TLS needs both -tls-cert-file and -tls-key-file")
	}
	if c.DevTLS && cmd != "dev" {
		return errors.New("-tls is for tenantd dev only: elsewhere give -tls-cert-file and -tls-key-file")
	}
	if !c.DedicatedCell && cmd != "dev" {
		return errors.New("-dedicated-cell is for tenantd dev only")
	}
	if c.DevTLS && c.TLSCertFile != "" {
		return errors.New("dev -tls makes its own certificate: drop -tls-cert-file and -tls-key-file, or -tls")
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("metrics address %q is not host:port: %w", c.MetricsListen, err)
		}
	}
	if c.DiskSoftWatermark < 0 || c.DiskHardWatermark < 0 || c.DiskSoftWatermark > 1 || c.DiskHardWatermark > 1 ||
		(c.DiskSoftWatermark > 0 && c.DiskHardWatermark > 0 && c.DiskSoftWatermark >= c.DiskHardWatermark) {
		return fmt.Errorf("disk watermarks must be fractions with soft below hard, got soft %v and hard %v", c.DiskSoftWatermark, c.DiskHardWatermark)
	}
	if c.SeedRate < 0 {
		return fmt.Errorf("seed rate must not be negative (0 is unlimited), got %d", c.SeedRate)
	}
	if c.MirrorRate < 0 {
		return fmt.Errorf("mirror rate must not be negative (0 is unlimited), got %d", c.MirrorRate)
	}
	if c.UsageSample != "" {
		d, err := time.ParseDuration(c.UsageSample)
		if err != nil || d < 10*time.Millisecond {
			return fmt.Errorf("usage sample interval %q: want a duration of at least 10ms, like 10s", c.UsageSample)
		}
	}
	if c.BillingInterval != "" {
		d, err := time.ParseDuration(c.BillingInterval)
		if err != nil || d < 100*time.Millisecond {
			return fmt.Errorf("billing interval %q: want a duration of at least 100ms, like 30s", c.BillingInterval)
		}
	}
	if cmd == "billing" && c.HealthListen != "" {
		if _, _, err := net.SplitHostPort(c.HealthListen); err != nil {
			return fmt.Errorf("health address %q is not host:port: %w", c.HealthListen, err)
		}
	}
	if _, err := c.gcSettings(); err != nil {
		return err
	}
	if cmd != "broker" && (c.GCPercent != "" || c.MemoryLimit != "") {
		return fmt.Errorf("gc percent and memory limit are broker settings; tenantd %s does not apply them", cmd)
	}
	if c.CompactInterval < 0 {
		return fmt.Errorf("compact interval must not be negative (0 is the default), got %v", c.CompactInterval)
	}
	if c.EgressBytesPerSec < 0 {
		return fmt.Errorf("egress bytes per second must not be negative, got %d", c.EgressBytesPerSec)
	}
	if cmd == "broker" {
		if c.NodeID < 0 || c.NodeID > 1<<20 {
			return fmt.Errorf("node id %d: want 1 to 1048576", c.NodeID)
		}
		if c.PeerCertDir != "" {
			if c.NodeID == 0 {
				return errors.New("-peer-cert-dir names files by node id: give -node-id (or SLUICE_POD_INDEX), or -peer-cert-file and -peer-key-file")
			}
			n := strconv.Itoa(c.NodeID)
			c.PeerCAFile = cmp.Or(c.PeerCAFile, filepath.Join(c.PeerCertDir, "ca.pem"))
			c.PeerCertFile = cmp.Or(c.PeerCertFile, filepath.Join(c.PeerCertDir, "node-"+n+".pem"))
			c.PeerKeyFile = cmp.Or(c.PeerKeyFile, filepath.Join(c.PeerCertDir, "node-"+n+"-key.pem"))
		}
		if c.NodeID > 0 && (c.KafkaAdvertise == "" || c.HTTPAdvertise == "" || c.RaftAdvertise == "") {
			return errors.New("a broker with -node-id registers itself: give -kafka-advertise, -http-advertise and -raft-advertise too")
		}
		if c.NodeID == 0 && (c.KafkaAdvertise != "" || c.HTTPAdvertise != "") {
			return errors.New("-kafka-advertise and -http-advertise are registered with the broker's -node-id: give it too")
		}
		if c.Cell == "" || c.BrokerID == "" || c.APIURL == "" || !strings.Contains(c.CellKey, ":") {
			return errors.New("a broker needs -cell, -broker-id, -api and a cell key id:secret (-cell-key or SLUICE_CELL_KEY)")
		}
		if c.PeerCAFile == "" || c.PeerCertFile == "" || c.PeerKeyFile == "" {
			return errors.New("a broker needs -peer-ca-file, -peer-cert-file and -peer-key-file: its Raft transport authenticates every peer with certificates of the cell CA (tenantd certs makes them)")
		}
		for _, a := range []string{c.RaftListen, c.RaftAdvertise, c.KafkaListen, c.HTTPListen, c.DebugListen, c.HealthListen, c.KafkaAdvertise, c.HTTPAdvertise} {
			if a != "" {
				if _, _, err := net.SplitHostPort(a); err != nil {
					return fmt.Errorf("address %q is not host:port: %w", a, err)
				}
			}
		}
		return nil
	}
	for _, a := range []string{c.RaftListen, c.KafkaListen, c.HTTPListen} {
		if a != "" {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("listen address %q is not host:port: %w", a, err)
			}
		}
	}
	if cmd != "dev" && c.DatabaseURL == "" {
		return errors.New("no database: set SLUICE_DATABASE_URL (or DATABASE_URL), database_url in the config file, or -database-url")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen address %q is not host:port: %w", c.Listen, err)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("data_dir is empty")
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// loadConfig layers the sources for one command.
func loadConfig(cmd string, args []string, getenv func(string) string) (Config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("tenantd "+cmd, flag.ContinueOnError)
	file := fs.String("config", getenv("SLUICE_CONFIG"), "JSON config file (env SLUICE_CONFIG)")
	dbURL := fs.String("database-url", "", "Postgres URL, for controlplane, billing and migrate (env SLUICE_DATABASE_URL or DATABASE_URL); the pool opens at most 16 connections unless it sets pool_max_conns")
	listen := fs.String("listen", "", "control plane HTTP address (env SLUICE_LISTEN; default "+cfg.Listen+")")
	dataDir := fs.String("data-dir", "", "dev: the dev stack's state directory; broker: the broker's data directory, holding cell-state.json and replicas/ (env SLUICE_DATA_DIR; default "+cfg.DataDir+")")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (env SLUICE_LOG_LEVEL; default info, for dev warn: its banner and warnings only)")
	private := fs.Bool("private-postgres", false, "dev: always start a private Postgres under the data dir")
	cell := fs.String("cell", "", "broker: the cell's id (env SLUICE_CELL)")
	brokerID := fs.String("broker-id", "", "broker: this broker's id (env SLUICE_BROKER_ID)")
	apiURL := fs.String("api", "", "broker: the control plane's URL (env SLUICE_API_URL)")
	cellKey := fs.String("cell-key", "", "broker: the cell key as id:secret (env SLUICE_CELL_KEY)")
	nodeID := fs.Int("node-id", 0, "broker: register at start as this node id of the cell with the advertised addresses (env SLUICE_NODE_ID; SLUICE_POD_INDEX=i means node id i+1; default: do not register, the operator created the broker)")
	kafkaAdvertise := fs.String("kafka-advertise", "", "broker with -node-id: the Kafka address clients are told, registered at start (env SLUICE_KAFKA_ADVERTISE)")
	httpAdvertise := fs.String("http-advertise", "", "broker with -node-id: the HTTP data API address, registered at start (env SLUICE_HTTP_ADVERTISE)")
	peerCertDir := fs.String("peer-cert-dir", "", "broker: directory of ca.pem, node-<node id>.pem and node-<node id>-key.pem as tenantd certs writes them, for the -peer-* files not given (env SLUICE_PEER_CERT_DIR)")
	metricsListen := fs.String("metrics-listen", "", "billing: serve the billing worker's Prometheus metrics at /metrics on this address; broker and dev: serve the brokers' Prometheus metrics at /metrics on this address, unauthenticated, so keep it private (env SLUICE_METRICS_LISTEN; default off: dev serves them on the control plane's /metrics, to operators only)")
	raftListen := fs.String("raft-listen", "", "broker: Raft transport listen address (env SLUICE_RAFT_LISTEN; default the advertised one); dev: the first broker's, the others take the next ports, port 0 picks free ones (default "+devRaftListen+")")
	raftAdvertise := fs.String("raft-advertise", "", "broker: Raft address peers dial (env SLUICE_RAFT_ADVERTISE; default the raft_addr the cell state lists for this broker)")
	peerCA := fs.String("peer-ca-file", "", "broker: PEM file of the cell CA certificate the Raft transport trusts (env SLUICE_PEER_CA_FILE)")
	peerCert := fs.String("peer-cert-file", "", "broker: PEM file of this broker's Raft transport certificate, issued by the cell CA for its node id (env SLUICE_PEER_CERT_FILE; reloaded on SIGHUP)")
	peerKey := fs.String("peer-key-file", "", "broker: PEM file of the key of -peer-cert-file (env SLUICE_PEER_KEY_FILE; reloaded on SIGHUP)")
	debugListen := fs.String("debug-listen", "", "broker: serve Go's pprof profiles on this address (env SLUICE_DEBUG_LISTEN; default off; unauthenticated, so use loopback)")
	healthListen := fs.String("health-listen", "", "broker: serve /livez and /readyz (serving its replicas) for probes on this address; billing: /livez and /readyz (its last round reached the database) (env SLUICE_HEALTH_LISTEN; default off)")
	operatorKeyFile := fs.String("operator-key-file", "", "migrate: also create an operator API key and write id:secret to this new file (first start of a deployment)")
	tlsCert := fs.String("tls-cert-file", "", "controlplane, broker, dev: PEM certificate every client-facing listener serves (Kafka SASL_SSL, HTTP data API, control plane and console over HTTPS); unset, they serve plaintext (env SLUICE_TLS_CERT_FILE; reloaded on SIGHUP)")
	tlsKey := fs.String("tls-key-file", "", "controlplane, broker, dev: PEM key of -tls-cert-file (env SLUICE_TLS_KEY_FILE; reloaded on SIGHUP)")
	tlsCA := fs.String("tls-ca-file", "", "controlplane, broker, dev: PEM CA bundle trusted when calling the control plane's API or another broker over HTTPS (env SLUICE_TLS_CA_FILE; default the system's roots)")
	devTLS := fs.Bool("tls", false, "dev: make a local CA and a certificate for 127.0.0.1 and localhost under the data dir and serve TLS on every listener (env SLUICE_DEV_TLS=1; default plaintext)")
	kafkaListen := fs.String("kafka-listen", "", "broker: Kafka listen address (env SLUICE_KAFKA_LISTEN; default the kafka_addr the cell state lists); dev: the first broker's, the others take the next ports, port 0 picks free ones (default "+devKafkaListen+")")
	httpListen := fs.String("http-listen", "", "broker: HTTP data API listen address (env SLUICE_HTTP_LISTEN; default the http_addr the cell state lists); dev: the first broker's, the others take the next ports, port 0 picks free ones (default "+devHTTPListen+")")
	redisAddr := fs.String("redis", "", "broker, dev: the cell's Redis for sharing quotas (env SLUICE_REDIS_ADDR; default "+defaultRedisAddr+")")
	rateRedis := fs.String("ratelimit-redis", "", "controlplane: Redis (host:port) sharing the API's rate limits among control plane instances (env SLUICE_RATELIMIT_REDIS; default none: each instance limits on its own)")
	diskSoft := fs.Float64("disk-soft-watermark", 0, "broker, dev: soft disk watermark as a fraction (default 0.80)")
	diskHard := fs.Float64("disk-hard-watermark", 0, "broker, dev: hard disk watermark as a fraction (default 0.90)")
	mailDir := fs.String("mail-dir", "", "controlplane, dev: also write every mail the control plane sends (it has no mailer: they are logged, not sent) as a file in this directory (env SLUICE_MAIL_DIR; dev default <data-dir>/mail)")
	egress := fs.Int64("egress-bytes-per-sec", 0, "broker, dev: fetch egress budget per broker for fair egress (default 256 MiB/s)")
	seedRate := fs.Int64("seed-rate", -1, "broker, dev: bytes a second a broker's replicas may copy from peers when seeded from their segments (behind the log start, or new); 0 is unlimited (default 64 MiB/s)")
	mirrorRate := fs.Int64("mirror-rate", -1, "broker, dev: bytes a second each partition of a tenant move may pull from the source cell when its topic sets no rate; 0 is unlimited (default 8 MiB/s)")
	usageSample := fs.String("usage-sample", "", "broker, dev: how often a broker samples the partitions it leads for partition-hours and storage byte-hours, a Go duration (env SLUICE_USAGE_SAMPLE; default 10s)")
	dedicatedCell := fs.Bool("dedicated-cell", true, "dev: also run a second cell, dev-cell-2 of the dedicated pool dev-dedicated, to move a tenant to (default true)")
	billingWorker := fs.Bool("billing-worker", true, "controlplane, dev: also run the billing worker in this process; set false where the billing role (tenantd billing) runs (env SLUICE_BILLING_WORKER; default true)")
	billingInterval := fs.String("billing-interval", "", "billing, controlplane, dev: how often the billing worker prunes the ledger and reports to Stripe, a Go duration (env SLUICE_BILLING_INTERVAL; default 30s); the Stripe key is env SLUICE_STRIPE_KEY only (none: the ledger is kept and nothing is sent)")
	stripeURL := fs.String("stripe-url", "", "billing, controlplane, dev: Stripe's API address, e.g. stripe-mock's (env SLUICE_STRIPE_URL; default Stripe's)")
	gcPercent := fs.String("gc-percent", "", "broker: the Go garbage collector's percent, off or 10 to 10000 (env SLUICE_GC_PERCENT; default 200, or GOGC when set); off needs -memory-limit")
	memoryLimit := fs.String("memory-limit", "", "broker: the Go runtime's soft memory limit, bytes with an optional KiB, MiB, GiB or TiB suffix, at least 64MiB (env SLUICE_MEMORY_LIMIT; default none, or GOMEMLIMIT when set)")
	journalFlag := fs.Bool("journal", true, "broker, dev: make small appends of every partition durable through one write-ahead journal per broker under the data dir (two 64 MiB files), one fdatasync a round instead of one per partition; false syncs each partition's segment (env SLUICE_JOURNAL; default true)")
	compactInterval := fs.Duration("compact-interval", 0, "broker, dev: how often the cleaner passes over the replicas of compacted topics (default 15s)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("parse config %s: %w", *file, err)
		}
	}
	for _, e := range []struct {
		names []string
		dst   *string
	}{
		{[]string{"SLUICE_DATABASE_URL", "DATABASE_URL"}, &cfg.DatabaseURL},
		{[]string{"SLUICE_LISTEN"}, &cfg.Listen},
		{[]string{"SLUICE_DATA_DIR"}, &cfg.DataDir},
		{[]string{"SLUICE_LOG_LEVEL"}, &cfg.LogLevel},
		{[]string{"SLUICE_CELL"}, &cfg.Cell},
		{[]string{"SLUICE_BROKER_ID"}, &cfg.BrokerID},
		{[]string{"SLUICE_API_URL"}, &cfg.APIURL},
		{[]string{"SLUICE_CELL_KEY"}, &cfg.CellKey},
		{[]string{"SLUICE_RAFT_LISTEN"}, &cfg.RaftListen},
		{[]string{"SLUICE_RAFT_ADVERTISE"}, &cfg.RaftAdvertise},
		{[]string{"SLUICE_PEER_CA_FILE"}, &cfg.PeerCAFile},
		{[]string{"SLUICE_PEER_CERT_FILE"}, &cfg.PeerCertFile},
		{[]string{"SLUICE_PEER_KEY_FILE"}, &cfg.PeerKeyFile},
		{[]string{"SLUICE_KAFKA_LISTEN"}, &cfg.KafkaListen},
		{[]string{"SLUICE_HTTP_LISTEN"}, &cfg.HTTPListen},
		{[]string{"SLUICE_DEBUG_LISTEN"}, &cfg.DebugListen},
		{[]string{"SLUICE_REDIS_ADDR"}, &cfg.RedisAddr},
		{[]string{"SLUICE_RATELIMIT_REDIS"}, &cfg.RateLimitRedis},
		{[]string{"SLUICE_TLS_CERT_FILE"}, &cfg.TLSCertFile},
		{[]string{"SLUICE_TLS_KEY_FILE"}, &cfg.TLSKeyFile},
		{[]string{"SLUICE_TLS_CA_FILE"}, &cfg.TLSCAFile},
		{[]string{"SLUICE_MAIL_DIR"}, &cfg.MailDir},
		{[]string{"SLUICE_KAFKA_ADVERTISE"}, &cfg.KafkaAdvertise},
		{[]string{"SLUICE_HTTP_ADVERTISE"}, &cfg.HTTPAdvertise},
		{[]string{"SLUICE_PEER_CERT_DIR"}, &cfg.PeerCertDir},
		{[]string{"SLUICE_HEALTH_LISTEN"}, &cfg.HealthListen},
		{[]string{"SLUICE_USAGE_SAMPLE"}, &cfg.UsageSample},
		{[]string{"SLUICE_BILLING_INTERVAL"}, &cfg.BillingInterval},
		{[]string{"SLUICE_STRIPE_URL"}, &cfg.StripeURL},
		{[]string{"SLUICE_STRIPE_KEY"}, &cfg.StripeKey},
		{[]string{"SLUICE_GC_PERCENT"}, &cfg.GCPercent},
		{[]string{"SLUICE_MEMORY_LIMIT"}, &cfg.MemoryLimit},
	} {
		for _, n := range e.names {
			if v := getenv(n); v != "" {
				*e.dst = v
				break
			}
		}
	}
	if err := envNodeID(&cfg, getenv); err != nil {
		return cfg, err
	}
	if v := getenv("SLUICE_METRICS_LISTEN"); v != "" {
		cfg.MetricsListen = v
	}
	if err := envBool(getenv, "SLUICE_BILLING_WORKER", &cfg.BillingWorker); err != nil {
		return cfg, err
	}
	if getenv("SLUICE_PRIVATE_POSTGRES") == "1" {
		cfg.PrivatePostgres = true
	}
	if err := envBool(getenv, "SLUICE_JOURNAL", &cfg.Journal); err != nil {
		return cfg, err
	}
	if getenv("SLUICE_DEV_TLS") == "1" {
		cfg.DevTLS = true
	}
	for _, f := range []struct {
		v   string
		dst *string
	}{{*dbURL, &cfg.DatabaseURL}, {*listen, &cfg.Listen}, {*dataDir, &cfg.DataDir}, {*logLevel, &cfg.LogLevel},
		{*cell, &cfg.Cell}, {*brokerID, &cfg.BrokerID}, {*apiURL, &cfg.APIURL}, {*cellKey, &cfg.CellKey},
		{*raftListen, &cfg.RaftListen}, {*raftAdvertise, &cfg.RaftAdvertise}, {*kafkaListen, &cfg.KafkaListen}, {*httpListen, &cfg.HTTPListen},
		{*peerCA, &cfg.PeerCAFile}, {*peerCert, &cfg.PeerCertFile}, {*peerKey, &cfg.PeerKeyFile},
		{*debugListen, &cfg.DebugListen}, {*operatorKeyFile, &cfg.OperatorKeyFile}, {*redisAddr, &cfg.RedisAddr}, {*rateRedis, &cfg.RateLimitRedis},
		{*tlsCert, &cfg.TLSCertFile}, {*tlsKey, &cfg.TLSKeyFile}, {*tlsCA, &cfg.TLSCAFile}, {*mailDir, &cfg.MailDir},
		{*kafkaAdvertise, &cfg.KafkaAdvertise}, {*httpAdvertise, &cfg.HTTPAdvertise}, {*peerCertDir, &cfg.PeerCertDir}, {*healthListen, &cfg.HealthListen},
		{*usageSample, &cfg.UsageSample}, {*billingInterval, &cfg.BillingInterval}, {*stripeURL, &cfg.StripeURL},
		{*gcPercent, &cfg.GCPercent}, {*memoryLimit, &cfg.MemoryLimit}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	if *private {
		cfg.PrivatePostgres = true
	}
	if *devTLS {
		cfg.DevTLS = true
	}
	if *metricsListen != "" {
		cfg.MetricsListen = *metricsListen
	}
	if *diskSoft != 0 {
		cfg.DiskSoftWatermark = *diskSoft
	}
	if *diskHard != 0 {
		cfg.DiskHardWatermark = *diskHard
	}
	if *nodeID != 0 {
		cfg.NodeID = *nodeID
	}
	if *egress != 0 {
		cfg.EgressBytesPerSec = *egress
	}
	if *seedRate != -1 {
		cfg.SeedRate = *seedRate
	}
	if *mirrorRate != -1 {
		cfg.MirrorRate = *mirrorRate
	}
	if *compactInterval != 0 {
		cfg.CompactInterval = *compactInterval
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "billing-worker" {
			cfg.BillingWorker = *billingWorker
		}
		if f.Name == "dedicated-cell" {
			cfg.DedicatedCell = *dedicatedCell
		}
		if f.Name == "journal" {
			cfg.Journal = *journalFlag
		}
	})
	return cfg, cfg.validate(cmd)
}

// envBool sets *dst from the environment variable name when it is set,
// refusing a value that is not a boolean.
func envBool(getenv func(string) string, name string, dst *bool) error {
	v := getenv(name)
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%s %q: want true or false", name, v)
	}
	*dst = b
	return nil
}

// envNodeID reads SLUICE_NODE_ID, or else SLUICE_POD_INDEX (a StatefulSet
// pod's index, from 0, as the apps.kubernetes.io/pod-index label gives it)
// as node id index+1.
func envNodeID(cfg *Config, getenv func(string) string) error {
	if v := getenv("SLUICE_NODE_ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("SLUICE_NODE_ID %q is not a whole number", v)
		}
		cfg.NodeID = n
		return nil
	}
	if v := getenv("SLUICE_POD_INDEX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("SLUICE_POD_INDEX %q is not a pod index (0, 1, 2, ...)", v)
		}
		cfg.NodeID = n + 1
	}
	return nil
}
