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
//   - dataplane never imports anything under controlplane: what the planes
//     share lives under contract;
//   - the quotas and billing cores import neither plane;
//   - console and terraform import nothing of either plane: they reach the
//     control plane through contract/client.
//
// The rules have no exceptions.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rules := []struct {
		from   string
		banned []string
	}{
		{"/dataplane", []string{"/controlplane"}},
		{"/contract", []string{"/controlplane", "/dataplane", "/console", "/terraform", "/tenantd", "/quotas", "/billing"}},
		{"/quotas", []string{"/controlplane", "/dataplane", "/billing", "/contract"}},
		{"/billing", []string{"/controlplane", "/dataplane"}},
		{"/console", []string{"/controlplane", "/dataplane"}},
		{"/terraform", []string{"/controlplane", "/dataplane"}},
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
				if violates(rel, r.banned) {
					t.Errorf("%s imports %s, which the design forbids", pkg, rel)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked; the test would prove nothing")
	}
}

func violates(imp string, banned []string) bool {
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
		{"/controlplane/pgtest", true},
		{"/controlplaneX", false},
		{"/contract/client", false},
		{"/dataplane/log", false},
	} {
		if got := violates(tc.imp, []string{"/controlplane"}); got != tc.want {
			t.Errorf("violates(%s) = %v", tc.imp, got)
		}
	}
}
