package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// devProcess is a running `tenantd dev` on free ports and its own
// database, as `make run` starts it, with what its banner printed.
type devProcess struct {
	bin    string
	cmd    *exec.Cmd
	exited chan error
	stderr *bytes.Buffer
	// From the banner: the API URL, the operator key (id:secret) and its
	// export line as tenantd admin reads it, the first broker's Kafka and
	// HTTP data addresses.
	apiURL, opKey       string
	dbURL               string
	opEnv               []string
	bootstrap, httpData string
	httpAddrs           []string // every broker's HTTP data address, httpData first
	// caFile is the CA the banner says to trust, with -tls.
	caFile  string
	dataDir string
}

// startDev builds tenantd and runs `tenantd dev` with extra flags until
// the test ends.
func startDev(t *testing.T, extra ...string) *devProcess {
	t.Helper()
	bin := buildTenantd(t)
	dbURL := pgtest.New(t)
	dataDir := t.TempDir()
	// Free Raft ports, so the test runs beside another tenantd dev.
	args := append([]string{"dev", "-listen", "127.0.0.1:0", "-raft-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-data-dir", dataDir}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "SLUICE_LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	// Wait, bounded, for the banner with the API URL and operator key.
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var apiURL, opKey string
	var opEnv []string // the banner's export line, as tenantd admin reads it
	urlRE := regexp.MustCompile(`API:\s+(https?://\S+)/v1`)
	caRE := regexp.MustCompile(`trust the CA (\S+)`)
	var caFile string
	keyRE := regexp.MustCompile(`export (SLUICE_ENDPOINT=\S+ SLUICE_API_KEY_ID=(\S+) SLUICE_API_KEY_SECRET=(\S+))`)
	kafkaRE := regexp.MustCompile(`Kafka on ([^,\s]+)`)
	httpRE := regexp.MustCompile(`HTTP data: (\S+)`)
	var bootstrap, httpData string
	var httpAddrs []string
	deadline := time.After(30 * time.Second)
	banner := false // the banner's last line was read
	for apiURL == "" || opKey == "" || !banner {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tenantd dev exited before it was ready: %s", stderr.String())
			}
			if m := urlRE.FindStringSubmatch(l); m != nil {
				apiURL = m[1]
			}
			if m := kafkaRE.FindStringSubmatch(l); m != nil {
				bootstrap = m[1]
			}
			if m := httpRE.FindStringSubmatch(l); m != nil {
				httpAddrs = strings.Split(m[1], ",")
				httpData = httpAddrs[0]
			}
			banner = banner || strings.Contains(l, "Press Ctrl-C to stop.")
			if m := caRE.FindStringSubmatch(l); m != nil {
				caFile = m[1]
			}
			if m := keyRE.FindStringSubmatch(l); m != nil {
				opKey, opEnv = m[2]+":"+m[3], strings.Fields(m[1])
			}
		case <-deadline:
			t.Fatalf("tenantd dev not ready within 30 s: %s", stderr.String())
		}
	}
	t.Logf("tenantd dev ready in %v at %s", time.Since(start).Round(time.Millisecond), apiURL)
	return &devProcess{bin: bin, dbURL: dbURL, cmd: cmd, exited: exited, stderr: stderr, apiURL: apiURL, opKey: opKey,
		opEnv: opEnv, bootstrap: bootstrap, httpData: httpData, httpAddrs: httpAddrs, caFile: caFile, dataDir: dataDir}
}

// mailToken is the token of the newest mail the dev control plane wrote
// to its mail directory (it sends none) for to.
func (d *devProcess) mailToken(t *testing.T, to string) string {
	t.Helper()
	text, err := mail.Last(filepath.Join(d.dataDir, "mail"), to)
	if err != nil {
		t.Fatal(err)
	}
	tok := mail.Token(text)
	if tok == "" {
		t.Fatalf("the newest mail to %s has no token:\n%s", to, text)
	}
	return tok
}
