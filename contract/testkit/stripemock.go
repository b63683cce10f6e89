package testkit

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StripeMock runs the stripe-mock that `make tools` installs
// (.ci/tools.d/stripe-mock.sh) on free loopback ports until the test
// ends, and returns its HTTP URL. It fails the test when stripe-mock is
// not installed.
func StripeMock(t testing.TB) string {
	t.Helper()
	bin := CachedTool(t, "stripe-mock")
	httpAddr, err := FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	httpsAddr, err := FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-http-addr", httpAddr, "-https-addr", httpsAddr)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	WaitForState(t, 30*time.Second, "stripe-mock to listen on "+httpAddr, func() (bool, string) {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return "http://" + httpAddr
}

// CachedTool is the path of a tool `make tools` installs into the
// module's .cache/bin; it fails the test when the tool is not there.
func CachedTool(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".cache", "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed (%v): run `make tools`", name, err)
	}
	return bin
}

// moduleRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
