package runbooks

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// promtoolVersion is what .ci/tools.d/prometheus.sh installs into
// <repo>/.cache/bin.
const promtoolVersion = "0.316.0"

// promtool finds promtool (toolBin), skipping the test without it
// outside CI.
func promtool(t *testing.T) string {
	t.Helper()
	bin := toolBin(t, "promtool")
	if bin == "" {
		t.Skip("promtool missing: `make tools` installs it")
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "version "+promtoolVersion) {
		t.Logf("promtool is not v%s: %s", promtoolVersion, strings.SplitN(string(out), "\n", 2)[0])
	}
	return bin
}

// TestAlertRules: the alerting rules are valid (promtool check rules) and
// every rule behaves as its unit tests say (promtool test rules), and
// every rule has a test and names an existing runbook.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(rules), "\n") {
		l = strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(l, "- alert: "); ok {
			n++
			if !strings.Contains(string(tests), "alertname: "+name+"\n") {
				t.Errorf("alert %s has no test in alerts_test.yml", name)
			}
		}
		if rb, ok := strings.CutPrefix(l, "runbook: runbooks/"); ok {
			if _, err := os.Stat(rb); err != nil {
				t.Errorf("alert names runbook %s: %v", rb, err)
			}
		}
	}
	if n < 9 {
		t.Errorf("%d alerts in alerts.yml, want the 9 of issue 20", n)
	}
}
