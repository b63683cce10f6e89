package testkit

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildTenantd builds the real tenantd binary into dir and returns its
// path, for tests that run it as a process. It builds by import path, so
// it works from any package's directory inside the module.
func BuildTenantd(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "tenantd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/tenantd").CombinedOutput(); err != nil {
		t.Fatalf("build tenantd: %v\n%s", err, out)
	}
	return bin
}
