package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// Layering: defaults, then file, then environment, then flags.
func TestConfigLayers(t *testing.T) {
	file := configFile(t, `{"listen":"127.0.0.1:1","log_level":"debug","database_url":"postgres://file"}`)
	env := map[string]string{"SLUICE_LISTEN": "127.0.0.1:2", "DATABASE_URL": "postgres://env"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name   string
		args   []string
		listen string
		db     string
		level  string
	}{
		{"file and env", []string{"-config", file}, "127.0.0.1:2", "postgres://env", "debug"},
		{"flags win", []string{"-config", file, "-listen", "127.0.0.1:3", "-database-url", "postgres://flag"}, "127.0.0.1:3", "postgres://flag", "debug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig("controlplane", tc.args, getenv)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Listen != tc.listen || cfg.DatabaseURL != tc.db || cfg.LogLevel != tc.level {
				t.Fatalf("got %+v", cfg)
			}
		})
	}
	cfg, err := loadConfig("dev", nil, func(string) string { return "" })
	if err != nil || cfg.Listen != "127.0.0.1:8080" || cfg.DataDir != ".dev" {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no database", nil},
		{"bad listen", []string{"-database-url", "x", "-listen", "nope"}},
		{"bad level", []string{"-database-url", "x", "-log-level", "loud"}},
		{"stray argument", []string{"-database-url", "x", "extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadConfig("controlplane", tc.args, func(string) string { return "" }); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// A broker's Raft addresses come from flags or the environment and must be
// host:port.
func TestBrokerRaftConfig(t *testing.T) {
	env := map[string]string{"SLUICE_RAFT_ADVERTISE": "10.0.0.1:7001"}
	cfg, err := loadConfig("broker", brokerArgs("-raft-listen", "0.0.0.0:7001"), func(k string) string { return env[k] })
	if err != nil || cfg.RaftListen != "0.0.0.0:7001" || cfg.RaftAdvertise != "10.0.0.1:7001" {
		t.Fatalf("raft addresses: %+v %v", cfg, err)
	}
	if bc := brokerConfigOf(cfg); bc.RaftListen != cfg.RaftListen || bc.RaftAdvertise != cfg.RaftAdvertise {
		t.Fatalf("broker config: %+v", bc)
	}
	if _, err := loadBrokerConfig("-raft-listen", "nope"); err == nil {
		t.Fatal("accepted a raft listen address without a port")
	}
}

// A broker's metrics address comes from the environment or a flag, and
// must be host:port.
func TestBrokerMetricsConfig(t *testing.T) {
	env := map[string]string{"SLUICE_METRICS_LISTEN": "127.0.0.1:9100"}
	cfg, err := loadConfig("broker", brokerArgs(), func(k string) string { return env[k] })
	if err != nil || cfg.MetricsListen != "127.0.0.1:9100" {
		t.Fatalf("from the environment: %+v %v", cfg, err)
	}
	cfg, err = loadConfig("broker", brokerArgs("-metrics-listen", "127.0.0.1:9200"), func(k string) string { return env[k] })
	if err != nil || cfg.MetricsListen != "127.0.0.1:9200" {
		t.Fatalf("the flag wins: %+v %v", cfg, err)
	}
	if _, err := loadBrokerConfig("-metrics-listen", "nope"); err == nil {
		t.Fatal("accepted a metrics address without a port")
	}
}

// peerArgs name peer certificate files for tests that only load a config.
var peerArgs = []string{"-peer-ca-file", "ca.pem", "-peer-cert-file", "node.pem", "-peer-key-file", "node-key.pem"}

// brokerArgs are the flags a broker's config needs (cell, id, control
// plane, cell key and peerArgs) followed by extra, in a new slice each
// call so that no two tests' appends share one.
func brokerArgs(extra ...string) []string {
	args := append([]string{"-cell", "c1", "-broker-id", "b1", "-api", "http://127.0.0.1:1", "-cell-key", "k:s"}, peerArgs...)
	return append(args, extra...)
}

// loadBrokerConfig loads a broker's config from brokerArgs(extra...) with
// an empty environment: what the tests of one broker setting need.
func loadBrokerConfig(extra ...string) (Config, error) {
	return loadConfig("broker", brokerArgs(extra...), func(string) string { return "" })
}

// brokerSettingCase is a broker's extra flags and the value one setting
// takes from them.
type brokerSettingCase[T comparable] struct {
	name string
	args []string
	want T
}

// testBrokerSettings loads each case's broker config and checks that the
// setting what, read by get from the loaded config and from the broker's
// config built from it, is the case's value in both.
func testBrokerSettings[T comparable](t *testing.T, what string, get func(Config) (loaded, broker T), cases []brokerSettingCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadBrokerConfig(tc.args...)
			loaded, broker := get(cfg)
			if err != nil || loaded != tc.want || broker != tc.want {
				t.Fatalf("%s %v (broker %v), want %v: %v", what, loaded, broker, tc.want, err)
			}
		})
	}
}

// peerFiles writes real peer credentials for Raft server id into a temp
// dir and returns the flags naming them.
func peerFiles(t *testing.T, id string) []string {
	t.Helper()
	files, err := peercert.EnsureDir(t.TempDir(), "test-cell", []string{id})
	if err != nil {
		t.Fatal(err)
	}
	f := files[id]
	return []string{"-peer-ca-file", f.CA, "-peer-cert-file", f.Cert, "-peer-key-file", f.Key}
}

// A broker's peer certificate files are required and layer like every
// setting: file, then environment, then flags.
func TestBrokerPeerConfig(t *testing.T) {
	base := []string{"-cell", "c1", "-broker-id", "b1", "-api", "http://127.0.0.1:1", "-cell-key", "k:s"}
	if _, err := loadConfig("broker", base, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "-peer-ca-file") {
		t.Fatalf("a broker without peer certificates: err = %v", err)
	}
	file := configFile(t, `{"peer_ca_file": "f-ca.pem", "peer_cert_file": "f.pem", "peer_key_file": "f-key.pem"}`)
	env := map[string]string{"SLUICE_PEER_CERT_FILE": "e.pem"}
	cfg, err := loadConfig("broker", append(base, "-config", file, "-peer-key-file", "k.pem"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got := brokerConfigOf(cfg).Peer; got != (peercert.Files{CA: "f-ca.pem", Cert: "e.pem", Key: "k.pem"}) {
		t.Fatalf("peer files: %+v", got)
	}
}

// tenantd certs makes a CA and node certificates a broker's transport
// accepts: they load as credentials and name the node's server id.
func TestCertsCommand(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	if err := certs([]string{"ca", "-cell", "c1", "-dir", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if err := certs([]string{"node", "-dir", dir, "-node-id", "3", "-host", "10.0.0.3"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sluice://cell/c1/node/3") {
		t.Fatalf("output: %s", out.String())
	}
	files, err := peercert.EnsureDir(dir, "c1", []string{"3"})
	if err != nil {
		t.Fatal(err)
	}
	if files["3"].Cert != filepath.Join(dir, "node-3.pem") {
		t.Fatalf("files: %+v", files)
	}
	if _, _, err := peercert.LoadCredentials(files["3"].CA, files["3"].Cert, files["3"].Key); err != nil {
		t.Fatal(err)
	}
	if err := certs([]string{"node", "-dir", dir}, &out); err == nil {
		t.Fatal("node without -node-id succeeded")
	}
}

// The listener TLS settings layer like the others and are checked: a
// certificate needs its key, and -tls (generate one) is dev's alone.
func TestConfigListenerTLS(t *testing.T) {
	file := configFile(t, `{"database_url":"postgres://file","tls_cert_file":"file.pem","tls_key_file":"file-key.pem","tls_ca_file":"file-ca.pem"}`)
	env := map[string]string{"SLUICE_TLS_CERT_FILE": "env.pem", "SLUICE_TLS_KEY_FILE": "env-key.pem"}
	cfg, err := loadConfig("controlplane", []string{"-config", file, "-tls-cert-file", "flag.pem"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSCertFile != "flag.pem" || cfg.TLSKeyFile != "env-key.pem" || cfg.TLSCAFile != "file-ca.pem" {
		t.Fatalf("layered TLS files: %+v", cfg)
	}
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
	}{
		{"certificate without key", "controlplane", []string{"-database-url", "x", "-tls-cert-file", "c.pem"}},
		{"key without certificate", "controlplane", []string{"-database-url", "x", "-tls-key-file", "k.pem"}},
		{"-tls outside dev", "controlplane", []string{"-database-url", "x", "-tls"}},
		{"-tls with a certificate", "dev", []string{"-tls", "-tls-cert-file", "c.pem", "-tls-key-file", "k.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadConfig(tc.cmd, tc.args, func(string) string { return "" }); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if cfg, err := loadConfig("dev", []string{"-tls"}, func(string) string { return "" }); err != nil || !cfg.DevTLS {
		t.Fatalf("dev -tls: %+v %v", cfg, err)
	}
}

// configFile writes a tenantd config file holding json in a temporary
// directory and returns its path.
func configFile(t *testing.T, json string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
