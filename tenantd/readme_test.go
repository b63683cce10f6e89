package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tourBlocks are the README's shell blocks that make up its tour (the
// two set-up commands, the Terraform part and the operator's export line
// with its placeholders are exercised by their own tests).
func tourBlocks(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var tour []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		b := m[1]
		if strings.HasPrefix(b, "make run") || strings.Contains(b, "<id>") || strings.Contains(b, `"role":"admin"`) {
			continue
		}
		tour = append(tour, b)
	}
	if len(tour) < 4 {
		t.Fatalf("found %d tour blocks in README.md, want the signup, kcat, group and HTTP parts", len(tour))
	}
	return strings.Join(tour, "\n")
}

// TestReadmeTourTwice runs the README's tour as written, with bash, curl,
// jq and kcat, against a real `tenantd dev`, twice in a row: a second run
// must work as well as the first (a refused signup used to leave
// TOKEN=null and every later call failed). The tour moves its tenant to
// the dedicated cell and back, with kcat on the first bootstrap address
// in between.
func TestReadmeTourTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	for _, tool := range []string{"bash", "curl", "jq", "kcat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run `make tools`", tool)
		}
	}
	d := startDev(t)
	script := tourBlocks(t)
	// The README speaks of make run's fixed addresses; this cell has free ports.
	if len(d.HTTPAddrs) != 3 {
		t.Fatalf("the banner names %d HTTP data addresses, want the 3 brokers'", len(d.HTTPAddrs))
	}
	script = strings.NewReplacer(
		"http://127.0.0.1:8080", d.APIURL,
		"127.0.0.1:8091", d.HTTPAddrs[0],
		"127.0.0.1:8092", d.HTTPAddrs[1],
		"127.0.0.1:8093", d.HTTPAddrs[2],
		"127.0.0.1:9092", d.Bootstrap,
		".dev/mail/", filepath.Join(d.DataDir, "mail")+"/",
		"./bin/tenantd ", d.Bin+" ",
	).Replace(script)
	if len(d.DedicatedKafka) != 3 {
		t.Fatalf("the banner names %d dedicated-cell Kafka addresses, want the 3 brokers'", len(d.DedicatedKafka))
	}
	if strings.Contains(script, "127.0.0.1:8080") || strings.Contains(script, "127.0.0.1:809") || strings.Contains(script, ".dev/") ||
		strings.Contains(script, "./bin/") {
		t.Fatalf("the tour names an address this test does not map:\n%s", script)
	}
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", script)
		// The operator's export line that make run prints, for the move.
		cmd.Env = append(os.Environ(), d.OpEnv...)
		// A kcat the timeout left behind keeps the output open: stop
		// waiting for it soon after bash ends.
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		cancel()
		text := string(out)
		if err != nil {
			t.Fatalf("tour run %d: %v\n%s\n%s", run, err, text, d.Stderr.String())
		}
		for _, want := range []string{
			"pending\nsession: ",            // the signup's answer, the same on both runs, then a session
			"\n\"orders\"\n",                // the topic (created once; the second run's 409 is expected)
			`"revoked"`,                     // step 5
			"\n401\n",                       // the revoked key refused
			"user-2 => paid",                // kcat read back what it produced
			`"message_id":`,                 // the HTTP publish
			"\"value\": \"paid\"",           // the HTTP read, decoded by jq
			`"action": "retry"`,             // the nack
			`{"offsets":[{"topic":"orders"`, // the commit
			"-> dev-cell-2: done;",          // the move to the dedicated cell
			"user-3 => moved",               // kcat on the same bootstrap address after it
			" at " + d.DedicatedKafka[0],    // the metadata names the dedicated cell's brokers
			"group read user-",              // a new group through the old address after the move
			"-> dev-cell-1: done;",          // and the move back
		} {
			if !strings.Contains(text, want) {
				t.Errorf("tour run %d printed no %q:\n%s", run, want, text)
			}
		}
		for _, bad := range []string{"Authentication failure", `"code": "unauthenticated"`, "Cannot iterate over null", "parse error"} {
			if strings.Contains(text, bad) {
				t.Errorf("tour run %d printed %q:\n%s", run, bad, text)
			}
		}
		if t.Failed() {
			return
		}
	}
}
