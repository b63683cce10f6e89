package deploytest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// unit is what the tests read of a systemd unit file.
type unit struct {
	execStart []string
	envFile   string
}

// parseUnit reads a unit file strictly enough for the tests: sections and
// Key=Value lines only, and the [Service] keys the tests use.
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not Key=Value in a section: %q", path, n, l)
			}
			if section == "[Service]" && k == "ExecStart" {
				u.execStart = strings.Fields(v)
			}
			if section == "[Service]" && k == "EnvironmentFile" {
				u.envFile = v
			}
		}
	}
	if len(u.execStart) == 0 || u.envFile == "" {
		t.Fatalf("%s: no ExecStart or EnvironmentFile", path)
	}
	return u
}

// TestSystemdUnits: the units pass systemd-analyze verify with no
// complaint (it exits 0 even on unknown keys, so any output fails), with
// their binary and environment file paths pointed at real files; and
// each unit's command line, environment file and example config, as
// docs/operations.md installs them, are accepted by tenantd: the config
// file decodes strictly (an unknown or misspelt key is an error) and its
// certificate paths load, checked by running tenantd migrate with them.
func TestSystemdUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: builds and runs tenantd")
	}
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "systemd")
	bin := buildTenantd(t)
	etc := t.TempDir() // stands for /etc/sluice
	tenantd(t, bin, nil, "certs", "ca", "-cell", "cell-a", "-dir", filepath.Join(etc, "tls"))
	tenantd(t, bin, nil, "certs", "node", "-node-id", "1", "-dir", filepath.Join(etc, "tls"))
	for _, f := range [][2]string{{"node-1.pem", "server.pem"}, {"node-1-key.pem", "server-key.pem"}} {
		if err := os.Rename(filepath.Join(etc, "tls", f[0]), filepath.Join(etc, "tls", f[1])); err != nil {
			t.Fatal(err)
		}
	}
	sub := strings.NewReplacer("/usr/local/bin/tenantd", bin, "/etc/sluice", etc)
	for _, f := range []string{"controlplane.json", "controlplane.env", "broker.json", "broker.env", "billing.json", "billing.env"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, f), []byte(sub.Replace(string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	analyze, haveAnalyze := exec.LookPath("systemd-analyze")
	for _, name := range []string{"sluice-controlplane.service", "sluice-broker.service", "sluice-billing.service"} {
		t.Run(name, func(t *testing.T) {
			u := parseUnit(t, filepath.Join(dir, name))
			if haveAnalyze == nil {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(t.TempDir(), name)
				if err := os.WriteFile(p, []byte(sub.Replace(string(b))), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(analyze, "verify", p).CombinedOutput()
				if err != nil || len(strings.TrimSpace(string(out))) > 0 {
					t.Fatalf("systemd-analyze verify %s: %v\n%s", name, err, out)
				}
			} else {
				t.Logf("no systemd-analyze: checked by the parser only")
			}
			if u.execStart[0] != "/usr/local/bin/tenantd" || len(u.execStart) != 4 || u.execStart[2] != "-config" {
				t.Fatalf("ExecStart %v, want /usr/local/bin/tenantd ROLE -config FILE", u.execStart)
			}
			env := readEnvFile(t, sub.Replace(u.envFile))
			// The role's own config file and environment, through tenantd's
			// config loading; migrate then needs only a database.
			args := []string{"migrate", "-config", sub.Replace(u.execStart[3]), "-database-url", pgtest.New(t)}
			cmd := exec.Command(bin, args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "applied") {
				t.Fatalf("tenantd %s with the unit's environment: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// readEnvFile reads a systemd EnvironmentFile's KEY=VALUE lines, leaving
// out the database URL (the test gives its own).
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok || !strings.HasPrefix(k, "SLUICE_") {
			t.Fatalf("%s: %q is not SLUICE_NAME=value", path, l)
		}
		if k != "SLUICE_DATABASE_URL" {
			env = append(env, l)
		}
	}
	return env
}
