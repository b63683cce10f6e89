package runbooks

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
)

// prometheusVersion is what .ci/tools.d/prometheus.sh installs into
// <repo>/.cache/bin (the same release as promtool).
const prometheusVersion = promtoolVersion

// promServer is a real Prometheus server scraping a stack's /metrics every
// second and evaluating alerts.yml every second, each rule's `for` read in
// seconds instead of minutes (a 5-minute page fires after 5 s): the rules'
// expressions as written, against the metrics the brokers really export.
type promServer struct {
	url string
	log *testkit.LogBuffer
}

// startPrometheus starts one for s until the test ends. Without a
// Prometheus binary (`make tools` installs it) it answers nil, except in
// CI, where that fails the test.
func startPrometheus(t *testing.T, s *stack) *promServer {
	t.Helper()
	bin := toolBin(t, "prometheus")
	if bin == "" {
		return nil
	}
	dir := t.TempDir()
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), scaleFor(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(s.apiURL)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(s.opKey, ":")
	// tenantd dev serves the control plane's and its brokers' metrics on
	// the control plane's /metrics, to an operator key; the job is the
	// brokers' job the rules name.
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: sluice-broker
    scheme: %s
    basic_auth: {username: %q, password: %q}
    static_configs: [{targets: [%q]}]
`, target.Scheme, id, secret, target.Host)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := testkit.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := &promServer{url: "http://" + addr, log: &testkit.LogBuffer{}}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	testkit.WaitForState(t, 60*time.Second, "Prometheus scraping the stack", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited: %v\n%s", err, p.log)
		default:
		}
		v, err := p.query(`up{job="sluice-broker"}`)
		if err != nil {
			return false, err.Error()
		}
		return len(v) == 1 && v[0].value == 1, fmt.Sprint(v)
	})
	return p
}

// forLine matches a rule's `for: Nm`.
var forLine = regexp.MustCompile(`(?m)^(\s+for: )([0-9]+)m$`)

// scaleFor reads every rule's `for` in seconds instead of minutes.
func scaleFor(rules []byte) []byte {
	return forLine.ReplaceAll(rules, []byte("${1}${2}s"))
}

// sample is one series of an instant query's answer.
type sample struct {
	labels map[string]string
	value  float64
}

func (s sample) String() string { return fmt.Sprintf("%v=%g", s.labels, s.value) }

// query evaluates expr now.
func (p *promServer) query(expr string) ([]sample, error) {
	var out struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(expr), &out); err != nil {
		return nil, err
	}
	var v []sample
	for _, r := range out.Data.Result {
		s, _ := r.Value[1].(string)
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil {
			return nil, fmt.Errorf("query %s: value %q: %w", expr, s, err)
		}
		v = append(v, sample{r.Metric, f})
	}
	return v, nil
}

// alert is one pending or firing alert.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

// alerts answers the alerts pending or firing now.
func (p *promServer) alerts() ([]alert, error) {
	var out struct {
		Data struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	err := p.get("/api/v1/alerts", &out)
	return out.Data.Alerts, err
}

func (p *promServer) get(path string, into any) error {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %.300s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, into)
}

// firing answers the firing alerts named name whose labels include match.
func (p *promServer) firing(name string, match map[string]string) ([]alert, error) {
	all, err := p.alerts()
	var out []alert
	for _, a := range all {
		if a.State != "firing" || a.Labels["alertname"] != name {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && a.Labels[k] == v
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, err
}

// waitFiring waits up to limit for alert name to fire with labels match
// and answers how long that took.
func (p *promServer) waitFiring(t *testing.T, limit time.Duration, name string, match map[string]string) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.WaitForState(t, limit, name+" firing for "+fmt.Sprint(match), func() (bool, string) {
		f, err := p.firing(name, match)
		if err != nil {
			return false, err.Error()
		}
		all, _ := p.alerts()
		return len(f) > 0, fmt.Sprintf("alerts now: %v", all)
	})
	return time.Since(start)
}

// ruleInput matches the metric names the rules read.
var ruleInput = regexp.MustCompile(`\b(sluice_[a-z_]+|up)\b`)

// checkRuleInputs: every metric a rule of alerts.yml reads has a series in
// what Prometheus scraped, so no rule waits on a name the brokers do not
// export (a renamed metric would leave its alert silent for ever).
func (p *promServer) checkRuleInputs(t *testing.T) {
	t.Helper()
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(rules), "\n") {
		if expr, ok := strings.CutPrefix(strings.TrimSpace(l), "expr: "); ok {
			for _, n := range ruleInput.FindAllString(expr, -1) {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	sort.Strings(names)
	if len(names) < 9 {
		t.Fatalf("the rules read %d metrics (%v); the expression parse is off", len(names), names)
	}
	for _, n := range names {
		v, err := p.query(fmt.Sprintf(`count(last_over_time(%s[10m]))`, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(v) == 0 || v[0].value == 0 {
			t.Errorf("alerts.yml reads %s, which the stack's /metrics never exported", n)
			continue
		}
		t.Logf("rule input %s: %g series", n, v[0].value)
	}
}

// healthAlerts are the rules that must stay silent on a healthy cell.
var healthAlerts = []string{"SluiceBrokerDown", "SluicePartitionsLeaderless", "SluicePartitionsUnderReplicated",
	"SluiceDiskAboveSoftWatermark", "SluiceDiskAboveHardWatermark", "SluiceControlPlaneUnreachable"}

// waitHealthy waits until none of the health alerts is pending or firing
// (a stack just started, its topics just created, may briefly have a
// partition without a leader).
func (p *promServer) waitHealthy(t *testing.T, limit time.Duration) {
	t.Helper()
	testkit.WaitForState(t, limit, "no cell-health alert pending or firing", func() (bool, string) {
		all, err := p.alerts()
		if err != nil {
			return false, err.Error()
		}
		var bad []alert
		for _, a := range all {
			if slices.Contains(healthAlerts, a.Labels["alertname"]) {
				bad = append(bad, a)
			}
		}
		return len(bad) == 0, fmt.Sprint(bad)
	})
}

// toolBin finds a tool `make tools` installs into <repo>/.cache/bin, else
// PATH's; "" when there is none, except in CI, where that fails the test.
func toolBin(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".cache", "bin", name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if bin, err := exec.LookPath(name); err == nil {
		return bin
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s missing in CI: run `make tools` (.ci/tools.d/prometheus.sh)", name)
	}
	t.Logf("%s missing: `make tools` installs it; the alerts are not evaluated against the stack", name)
	return ""
}
