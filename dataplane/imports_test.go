package dataplane_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// TestImportDirection enforces the design's import rules over the whole
// module, so that a wrong import fails CI instead of waiting for review:
//   - dataplane never imports controlplane beyond its public leaf packages;
//   - the quotas and billing cores import neither plane;
//   - console and terraform reach the control plane only through its client
//     and the shared leaf packages.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	shared := []string{"/controlplane/api", "/controlplane/catalog", "/controlplane/credential", "/controlplane/authz", "/controlplane/topicspec", "/controlplane/wire"}
	rules := []struct {
		from    string
		banned  []string
		allowed []string
	}{
		{"/dataplane", []string{"/controlplane"}, append(shared, "/controlplane/client")},
		{"/quotas", []string{"/controlplane", "/dataplane", "/billing"}, nil},
		{"/billing", []string{"/controlplane", "/dataplane"}, shared},
		{"/console", []string{"/controlplane", "/dataplane"}, append(shared, "/controlplane/client")},
		{"/terraform", []string{"/controlplane", "/dataplane"}, append(shared, "/controlplane/client")},
	}
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, imports := strings.TrimPrefix(fields[0], module), fields[1:]
		for _, r := range rules {
			if pkg != r.from && !strings.HasPrefix(pkg, r.from+"/") {
				continue
			}
			checked++
			for _, imp := range imports {
				rel, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				if violates(rel, r.banned, r.allowed) {
					t.Errorf("%s imports %s, which the design forbids", pkg, rel)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked; the test would prove nothing")
	}
}

func violates(imp string, banned, allowed []string) bool {
	for _, a := range allowed {
		if imp == a {
			return false
		}
	}
	for _, b := range banned {
		if imp == b || strings.HasPrefix(imp, b+"/") {
			return true
		}
	}
	return false
}

// The rule checker itself, on known cases.
func TestViolates(t *testing.T) {
	for _, tc := range []struct {
		imp  string
		want bool
	}{
		{"/controlplane", true},
		{"/controlplane/client", false},
		{"/controlplane/pgtest", true},
		{"/controlplaneX", false},
		{"/dataplane/log", false},
	} {
		if got := violates(tc.imp, []string{"/controlplane"}, []string{"/controlplane/client"}); got != tc.want {
			t.Errorf("violates(%s) = %v", tc.imp, got)
		}
	}
}
