package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestAdminEnv: tenantd admin finds the control plane and its operator key
// under the names tenantd dev prints and the Terraform provider reads, and
// under the older ones, against a real control plane.
func TestAdminEnv(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, _ := adminControlPlane(t)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"current names", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_KEY_ID": id, "SLUICE_API_KEY_SECRET": secret}, ""},
		{"older names", map[string]string{"SLUICE_API_URL": hs.URL, "SLUICE_API_KEY": id + ":" + secret}, ""},
		{"current names win", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_URL": "http://127.0.0.1:1",
			"SLUICE_API_KEY_ID": id, "SLUICE_API_KEY_SECRET": secret, "SLUICE_API_KEY": "ak_nope:nope"}, ""},
		{"no key", map[string]string{"SLUICE_ENDPOINT": hs.URL}, "SLUICE_API_KEY_ID"},
		{"half a key", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_KEY_ID": id}, "SLUICE_API_KEY_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := admin(ctx, []string{"pools", "list"}, &out, func(k string) string { return tc.env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("admin pools list: %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("admin pools list: %v; want an error naming %s", err, tc.wantErr)
			case tc.wantErr == "" && !strings.Contains(out.String(), "ID"):
				t.Errorf("no table in the output: %q", out.String())
			}
		})
	}
}

// TestAdminHelpAndTables: a command's -h prints its help without calling
// the control plane (quota set -h used to take -h for a tenant id and
// answer not_found); single objects print as a FIELD VALUE table like the
// lists do, and as JSON with -o json; disk use is in binary units.
func TestAdminHelpAndTables(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, mailDir := adminControlPlane(t)
	run, _ := adminCommands(ctx, t, hs.URL, id, secret)
	for _, args := range [][]string{{"quota", "set", "-h"}, {"quota", "set", "--help"}, {"tenants", "show", "-h"}} {
		out, err := run(args...)
		if err != nil || !strings.Contains(out, "usage: tenantd admin") || strings.Contains(out, "not_found") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if out, _ := run("quota", "set", "-h"); !strings.Contains(out, "-produce-bytes-per-sec") {
		t.Errorf("quota set -h lists no flags:\n%s", out)
	}
	if _, err := run("quota", "set", "-produce-bytes-per-sec", "5"); err == nil || !strings.Contains(err.Error(), "TENANT_ID comes before any flags") {
		t.Errorf("quota set with a flag for its tenant id: %v", err)
	}

	cp := client.New(hs.URL, client.WithAPIKey(id, secret))
	cptest.SeedFleet(t, cp, cptest.TestAddrs)
	res, err := cptest.SignUp(ctx, client.New(hs.URL), mailDir, api.SignupRequest{TenantName: "helpco", Email: "ops@helpco.test", Password: "password-helpco-1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run("quota", "show", res.Tenant.ID)
	if err != nil || !strings.HasPrefix(out, "FIELD") || !regexp.MustCompile(`(?m)^produce_bytes_per_sec\s+\d+$`).MatchString(out) {
		t.Fatalf("quota show as a table: %v\n%s", err, out)
	}
	out, err = run("-o", "json", "quota", "show", res.Tenant.ID)
	var q api.Quotas
	if err != nil || json.Unmarshal([]byte(out), &q) != nil || q.ProduceBytesPerSec == 0 {
		t.Fatalf("quota show -o json: %v\n%s", err, out)
	}
	out, err = run("tenants", "show", res.Tenant.ID)
	if err != nil || !regexp.MustCompile(`(?m)^quotas\.max_topics\s+\d+$`).MatchString(out) || !regexp.MustCompile(`(?m)^name\s+helpco$`).MatchString(out) {
		t.Fatalf("tenants show as a table: %v\n%s", err, out)
	}
	for _, tc := range []struct{ cmd, status string }{{"suspend", "suspended"}, {"resume", "active"}} {
		out, err = run("tenants", tc.cmd, res.Tenant.ID)
		if err != nil || !regexp.MustCompile(`(?m)^status\s+`+tc.status+`$`).MatchString(out) {
			t.Fatalf("tenants %s: %v\n%s", tc.cmd, err, out)
		}
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {5 << 30, "5.0 GiB"}} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := diskUse(1<<30, 4<<30); got != "1.0 GiB (25%)" {
		t.Errorf("diskUse = %q", got)
	}
}

// adminControlPlane starts a real control plane on a fresh database with
// no fleet (cptest.StartEmpty) and returns it with its operator key and
// the directory its mail goes to.
func adminControlPlane(t *testing.T) (*cptest.Env, string, string, string) {
	t.Helper()
	cp := cptest.StartEmpty(t)
	return cp, cp.OperatorKeyID, cp.OperatorSecret, cp.MailDir
}

// adminEnv is the environment tenantd admin reads, naming the control
// plane at url (unset when url is empty) and the operator key id:secret
// under the names tenantd dev prints.
func adminEnv(url, id, secret string) func(string) string {
	env := map[string]string{"SLUICE_ENDPOINT": url, "SLUICE_API_KEY_ID": id, "SLUICE_API_KEY_SECRET": secret}
	return func(k string) string { return env[k] }
}

// adminCommands returns run, which runs tenantd admin with args against
// the control plane at url with the operator key id:secret (adminEnv)
// and returns what it printed, and mustRun,
// which is run failing t on an error.
func adminCommands(ctx context.Context, t *testing.T, url, id, secret string) (run func(...string) (string, error), mustRun func(...string) string) {
	getenv := adminEnv(url, id, secret)
	run = func(args ...string) (string, error) {
		var out bytes.Buffer
		err := admin(ctx, args, &out, getenv)
		return out.String(), err
	}
	mustRun = func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		return out
	}
	return run, mustRun
}

// wantHelp checks that tenantd admin args, a command's -h, prints want
// with neither a control plane nor a key.
func wantHelp(ctx context.Context, t *testing.T, want string, args ...string) {
	t.Helper()
	var help bytes.Buffer
	if err := admin(ctx, args, &help, func(string) string { return "" }); err != nil || !strings.Contains(help.String(), want) {
		t.Errorf("%s without a control plane: %v\n%s", strings.Join(args, " "), err, help.String())
	}
}
