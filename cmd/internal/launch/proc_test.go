package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
)

// A started process runs, a stopped (SIGSTOP) one still ends on Stop, and
// its log holds its output between the start and exit lines.
func TestProcStopEvenWhenPaused(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "p.log")
	p, err := Start("sh", logPath, []string{"LAUNCH_TEST=hello"}, "/bin/sh", "-c", "echo $LAUNCH_TEST; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Exited() != nil {
		t.Fatal("the process is not running")
	}
	if err := WaitFor(context.Background(), "the echo in the log", time.Minute, func() error {
		b, err := os.ReadFile(logPath)
		if err == nil && !strings.Contains(string(b), "hello") {
			err = errors.New("not yet")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGSTOP)
	if !p.Stop(30 * time.Second) {
		t.Fatal("a paused process did not end on SIGTERM within 30 s")
	}
	if p.Running() || p.Exited() == nil {
		t.Fatal("the process still runs after Stop")
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "start sh") || lines[1] != "hello" || !strings.Contains(lines[2], "exit sh") {
		t.Fatalf("log:\n%s", b)
	}
}

func TestFreeAddrsDistinct(t *testing.T) {
	addrs, err := FreeAddrs("127.0.0.1", 8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("addresses %v", addrs)
		}
		seen[a] = true
	}
}

// Repeat calls f until stopped or until f returns false; stop returns
// once the call under way has, and may be called again.
func TestRepeat(t *testing.T) {
	var calls, returned atomic.Int64
	stop := Repeat(func() bool {
		calls.Add(1)
		time.Sleep(time.Millisecond) // a call under way when stop is called
		returned.Add(1)
		return true
	})
	testkit.WaitFor(t, time.Minute, "a few calls", func() bool { return calls.Load() >= 3 })
	stop()
	if c, r := calls.Load(), returned.Load(); c != r {
		t.Fatalf("stop returned with a call under way: %d calls, %d returned", c, r)
	}
	stop()

	var ended atomic.Int64
	stop = Repeat(func() bool { return ended.Add(1) < 2 })
	testkit.WaitFor(t, time.Minute, "the call that returns false", func() bool { return ended.Load() >= 2 })
	stop()
	if n := ended.Load(); n != 2 {
		t.Fatalf("f was called %d times, want 2: once more after it returned false", n)
	}
}
