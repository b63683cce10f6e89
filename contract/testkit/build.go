package testkit

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildTenantd builds the real tenantd binary into dir and returns its
// path, for tests that run it as a process. It builds by import path, so
// it works from any package's directory inside the module.
func BuildTenantd(t testing.TB, dir string) string {
	t.Helper()
	bin, err := CompileTenantd(dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// CompileTenantd is BuildTenantd returning the failure (with the
// compiler's output) instead of failing a test: for a build shared by a
// package's tests behind a sync.Once, where no one t owns it.
func CompileTenantd(dir string) (string, error) {
	bin := filepath.Join(dir, "tenantd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/tenantd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build tenantd: %w\n%s", err, out)
	}
	return bin, nil
}
