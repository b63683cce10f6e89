// Package devtest runs `tenantd dev` (the control plane, a 3-broker shared
// cell and a 3-broker dedicated cell in one process, as `make run` starts
// it) as a real process on free
// ports and its own database, and reads what its banner prints. The
// tenantd and runbooks tests start it this one way. Only tests import it.
package devtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// Dev is a running `tenantd dev` and what its banner printed.
type Dev struct {
	Bin     string // the tenantd binary
	DBURL   string // its database
	DataDir string // its -data-dir
	Cmd     *exec.Cmd
	// Exited receives the process's exit once; a test that reads it must
	// put it back for the cleanup.
	Exited chan error
	Stderr *testkit.LogBuffer
	// From the banner: the API URL, the operator key (id:secret) and its
	// export line as tenantd admin reads it, the first broker's Kafka and
	// HTTP data addresses and every broker's HTTP data address (HTTPData
	// first), and the CA to trust (with -tls).
	APIURL, OpKey       string
	OpEnv               []string
	Bootstrap, HTTPData string
	HTTPAddrs           []string
	CAFile              string
	// From the banner's Dedicated line (none with -dedicated-cell=false):
	// the dedicated cell's brokers' Kafka and HTTP data addresses.
	DedicatedKafka, DedicatedHTTP []string
}

// Start runs bin (a tenantd binary) as `tenantd dev` with extra flags
// until the test ends, and waits up to ready for its banner. The Raft,
// control plane, Kafka and HTTP listeners are on free ports, so it runs
// beside another tenantd dev.
func Start(t *testing.T, bin string, ready time.Duration, extra ...string) *Dev {
	t.Helper()
	d := &Dev{Bin: bin, DBURL: pgtest.New(t), DataDir: t.TempDir(), Exited: make(chan error, 1), Stderr: &testkit.LogBuffer{}}
	args := append([]string{"dev", "-listen", "127.0.0.1:0", "-raft-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0",
		"-http-listen", "127.0.0.1:0", "-data-dir", d.DataDir}, extra...)
	d.Cmd = exec.Command(bin, args...)
	d.Cmd.Env = append(os.Environ(), "DATABASE_URL="+d.DBURL, "SLUICE_LOG_LEVEL=warn")
	stdout, err := d.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.Cmd.Stderr = d.Stderr
	start := time.Now()
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.Exited <- d.Cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.Cmd.Process.Kill()
		<-d.Exited
	})

	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	urlRE := regexp.MustCompile(`API:\s+(https?://\S+)/v1`)
	caRE := regexp.MustCompile(`trust the CA (\S+)`)
	keyRE := regexp.MustCompile(`export (SLUICE_ENDPOINT=\S+ SLUICE_API_KEY_ID=(\S+) SLUICE_API_KEY_SECRET=(\S+))`)
	kafkaRE := regexp.MustCompile(`Kafka on ([^,\s]+)`)
	httpRE := regexp.MustCompile(`HTTP data: (\S+)`)
	dedicatedRE := regexp.MustCompile(`Dedicated: .*\(Kafka (\S+), HTTP (\S+)\)`)
	deadline := time.After(ready)
	for banner := false; !banner; { // until the banner's last line
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tenantd dev exited before it was ready: %s", d.Stderr.String())
			}
			if m := urlRE.FindStringSubmatch(l); m != nil {
				d.APIURL = m[1]
			}
			if m := kafkaRE.FindStringSubmatch(l); m != nil {
				d.Bootstrap = m[1]
			}
			if m := httpRE.FindStringSubmatch(l); m != nil {
				d.HTTPAddrs = strings.Split(m[1], ",")
				d.HTTPData = d.HTTPAddrs[0]
			}
			if m := dedicatedRE.FindStringSubmatch(l); m != nil {
				d.DedicatedKafka, d.DedicatedHTTP = strings.Split(m[1], ","), strings.Split(m[2], ",")
			}
			if m := caRE.FindStringSubmatch(l); m != nil {
				d.CAFile = m[1]
			}
			if m := keyRE.FindStringSubmatch(l); m != nil {
				d.OpKey, d.OpEnv = m[2]+":"+m[3], strings.Fields(m[1])
			}
			banner = strings.Contains(l, "Press Ctrl-C to stop.")
		case <-deadline:
			t.Fatalf("tenantd dev not ready within %v: %s", ready, d.Stderr.String())
		}
	}
	// Keep reading, so that nothing it prints later blocks it.
	go func() {
		for range lines {
		}
	}()
	if d.APIURL == "" || d.OpKey == "" || d.Bootstrap == "" || d.HTTPData == "" {
		t.Fatalf("banner incomplete: %+v", d)
	}
	t.Logf("tenantd dev ready in %v at %s", time.Since(start).Round(time.Millisecond), d.APIURL)
	return d
}

// MailToken is the token of the newest mail the dev control plane wrote
// to its mail directory for to; a mail without one fails t.
func (d *Dev) MailToken(t *testing.T, to string) string {
	t.Helper()
	text, err := mail.Last(filepath.Join(d.DataDir, "mail"), to)
	if err != nil {
		t.Fatal(err)
	}
	tok := mail.Token(text)
	if tok == "" {
		t.Fatalf("the newest mail to %s has no token:\n%s", to, text)
	}
	return tok
}
