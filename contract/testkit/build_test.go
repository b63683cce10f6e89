package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBuildTenantd: the built file is the tenantd binary (its -h lists
// its commands).
func TestBuildTenantd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tenantd")
	}
	bin := BuildTenantd(t, t.TempDir())
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	if !strings.Contains(string(out), "usage: tenantd <command>") || !strings.Contains(string(out), "controlplane") {
		t.Fatalf("%s -h printed %q", bin, out)
	}
}
