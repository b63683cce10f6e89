package runbooks

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// block is one marked shell block of a runbook, with the expectations
// that follow it.
type block struct {
	file, heading string
	line          int
	script        string
	expect        []*regexp.Regexp // each must match the block's output
	// limit, when set, replaces the test's limit for one run.
	limit time.Duration
	// retry, when set, is how long the block is run again (2 s apart)
	// until its output matches: for a step whose effect takes a moment
	// to reach every broker.
	retry time.Duration
}

// Markers: "```sh {run}" opens a block the test runs (and a reader sees
// as run); "```sh {run, again until it matches, up to 60s}" one the
// reader runs again until the output looks as expected; "```sh {run, up
// to 300s}" one that may take that long; "```text
// {expect}" right after it lists, one per line, regular expressions its
// output must match. Plain "```sh" blocks are shown, not run.
const (
	runFence    = "```sh {run}"
	expectFence = "```text {expect}"
)

// timedFence matches the fence of a block with a time: run again until
// it matches for up to that long, or, without "again until it matches",
// allowed to run that long once (a move, which takes as long as its data).
var timedFence = regexp.MustCompile("^```sh \\{run(, again until it matches)?, up to ([0-9]+s)\\}$")

// parseRunbook extracts a runbook's run blocks in order.
func parseRunbook(path string) ([]block, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []block
	var cur *block
	var heading string
	mode := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case mode == "" && strings.HasPrefix(l, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
		case mode == "" && strings.TrimSpace(l) == runFence:
			out = append(out, block{file: filepath.Base(path), heading: heading, line: n})
			cur, mode = &out[len(out)-1], "run"
		case mode == "" && timedFence.MatchString(strings.TrimSpace(l)):
			m := timedFence.FindStringSubmatch(strings.TrimSpace(l))
			d, err := time.ParseDuration(m[2])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			b := block{file: filepath.Base(path), heading: heading, line: n, limit: d}
			if m[1] != "" {
				b.retry, b.limit = d, 0
			}
			out = append(out, b)
			cur, mode = &out[len(out)-1], "run"
		case mode == "" && strings.TrimSpace(l) == expectFence:
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: an expect block with no run block before it", path, n)
			}
			mode = "expect"
		case mode == "" && strings.HasPrefix(strings.TrimSpace(l), "```"):
			mode = "other"
			if strings.TrimSpace(l) != "```" {
				cur = nil // another block between: the next expect has no run block
			}
		case mode != "" && strings.TrimSpace(l) == "```":
			if mode == "other" {
				cur = nil
			}
			mode = ""
		case mode == "run":
			cur.script += l + "\n"
		case mode == "expect":
			if strings.TrimSpace(l) == "" {
				continue
			}
			re, err := regexp.Compile("(?m)" + strings.TrimSpace(l))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: expect %q: %w", path, n, l, err)
			}
			cur.expect = append(cur.expect, re)
		case mode == "" && strings.TrimSpace(l) != "":
			cur = nil // prose between a run block and an expect block
		}
	}
	if mode != "" {
		return nil, fmt.Errorf("%s: unclosed code block", path)
	}
	return out, sc.Err()
}

// runBlock runs one block with bash -euo pipefail in env and checks its
// expectations; it fails the test on a non-zero exit (a command that
// drifted from the CLI) or an unmatched expectation.
func runBlock(t *testing.T, b block, env []string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(b.retry)
	if b.limit > 0 {
		limit = b.limit
	}
	for {
		out, miss := runOnce(t, b, env, limit)
		if miss == nil {
			t.Logf("%s:%d (%s)\n$ %s%s", b.file, b.line, b.heading, b.script, out)
			return out
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("%s:%d (%s): the output does not match %q, as the runbook says it should\n$ %s%s", b.file, b.line, b.heading, miss, b.script, out)
		}
		t.Logf("%s:%d (%s): not yet %q; running it again", b.file, b.line, b.heading, miss)
		time.Sleep(2 * time.Second) // the pace a reader re-runs a command at
	}
}

// runOnce runs the block once and answers its output and the first
// expectation it misses (nil: all matched).
func runOnce(t *testing.T, b block, env []string, limit time.Duration) (string, *regexp.Regexp) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.script)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s:%d (%s): %v\n$ %s%s", b.file, b.line, b.heading, err, b.script, out.String())
		}
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s:%d (%s): still running after %s\n$ %s%s", b.file, b.line, b.heading, limit, b.script, out.String())
	}
	for _, re := range b.expect {
		if !re.MatchString(out.String()) {
			return out.String(), re
		}
	}
	return out.String(), nil
}

// TestRunbooksWellFormed: every runbook names its alert, has run blocks,
// and its blocks parse; every alert of alerts.yml has a runbook.
func TestRunbooksWellFormed(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	want := []string{"broker-lost.md", "control-plane-down.md", "disk-watermark.md", "hot-tenant.md", "lag-beyond-retention.md", "leaked-key.md", "stuck-move.md"}
	for _, w := range want {
		if !contains(files, w) {
			t.Errorf("no runbook %s", w)
		}
	}
	for _, f := range files {
		if f == "README.md" {
			continue
		}
		blocks, err := parseRunbook(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			t.Errorf("%s has no run blocks", f)
		}
		raw, _ := os.ReadFile(f)
		for _, section := range []string{"## Alert", "## Rollback"} {
			if !strings.Contains(string(raw), section) {
				t.Errorf("%s has no %q section", f, section)
			}
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestParseFences: each marker gives its block what it says.
func TestParseFences(t *testing.T) {
	md := "# Step\n\n```sh {run}\necho a\n```\n\n```sh {run, again until it matches, up to 60s}\necho b\n```\n\n" +
		"```text {expect}\n^b$\n```\n\n```sh {run, up to 300s}\necho c\n```\n\n```sh\necho shown\n```\n"
	path := filepath.Join(t.TempDir(), "fences.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	bs, err := parseRunbook(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 {
		t.Fatalf("parsed %d run blocks, want 3: %+v", len(bs), bs)
	}
	for i, want := range []struct {
		script       string
		retry, limit time.Duration
		expectations int
	}{{"echo a\n", 0, 0, 0}, {"echo b\n", time.Minute, 0, 1}, {"echo c\n", 0, 5 * time.Minute, 0}} {
		b := bs[i]
		if b.script != want.script || b.retry != want.retry || b.limit != want.limit || len(b.expect) != want.expectations || b.heading != "Step" {
			t.Errorf("block %d: %q retry %v limit %v, %d expectations, heading %q; want %+v", i, b.script, b.retry, b.limit, len(b.expect), b.heading, want)
		}
	}
}
