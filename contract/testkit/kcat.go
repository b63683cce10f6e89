package testkit

import (
	"os/exec"
	"testing"
)

// Kcat is the path of kcat, the librdkafka client `make tools` installs
// (Debian's kcat). Without it the test fails, except under -short, where
// it is skipped.
func Kcat(t testing.TB) string {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if testing.Short() {
			t.Skip("kcat not installed (-short)")
		}
		t.Fatal("kcat is not installed: run `make tools` (or `apt-get install -y kcat`)")
	}
	return kcat
}
