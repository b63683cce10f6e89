package testkit

import (
	"fmt"
	"log/slog"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClockAdvances(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	c := NewClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if got := c.Advance(3 * time.Second); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Advance returned %v, want %v", got, t0.Add(3*time.Second))
	}
	if got := c.Now(); !got.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("Now after Advance = %v", got)
	}
}

func TestLogBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines written, want 800", n)
	}
}

// recordingTB is a testing.TB that keeps what is logged through it.
type recordingTB struct {
	testing.TB
	lines []string
	fatal string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Log(args ...any) { r.lines = append(r.lines, fmt.Sprint(args...)) }

// Fatalf keeps the message and stops the calling goroutine, as t's does.
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestLoggerSendsEachLineThroughT: each record at the level or above is
// one t.Log call carrying the message and attributes, without the
// handler's newline; records below the level are dropped.
func TestLoggerSendsEachLineThroughT(t *testing.T) {
	rec := &recordingTB{TB: t}
	log := Logger(rec, slog.LevelWarn)
	log.Info("dropped", "k", 1)
	log.Warn("disk slow", "partition", 3)
	log.Error("disk gone")
	if len(rec.lines) != 2 {
		t.Fatalf("got %d lines %q, want 2", len(rec.lines), rec.lines)
	}
	if l := rec.lines[0]; !strings.Contains(l, `level=WARN msg="disk slow" partition=3`) || strings.HasSuffix(l, "\n") {
		t.Fatalf("first line %q", l)
	}
	if l := rec.lines[1]; !strings.Contains(l, `level=ERROR msg="disk gone"`) {
		t.Fatalf("second line %q", l)
	}
}

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

// TestWaitFor: WaitFor returns once cond holds; a cond that never holds
// fails the test after the timeout, naming what was waited for.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	rec := &recordingTB{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(rec, 50*time.Millisecond, "what never comes", func() bool { return false })
	}()
	<-done
	if !strings.Contains(rec.fatal, "timed out after 50ms waiting for what never comes") {
		t.Fatalf("failure %q", rec.fatal)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", waited)
	}
}

// TestWaitForState: the failure after the timeout carries the last state
// cond saw, not an earlier one; a cond that comes to hold returns.
func TestWaitForState(t *testing.T) {
	n := 0
	WaitForState(t, 10*time.Second, "the second call", func() (bool, string) { n++; return n == 2, fmt.Sprint("call ", n) })
	if n != 2 {
		t.Fatalf("cond called %d times, want 2", n)
	}
	rec := &recordingTB{TB: t}
	done := make(chan struct{})
	calls := 0
	go func() {
		defer close(done)
		WaitForState(rec, 50*time.Millisecond, "a ready port", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("refused, attempt %d", calls)
		})
	}()
	<-done
	want := fmt.Sprintf("timed out after 50ms waiting for a ready port; last seen:\nrefused, attempt %d", calls)
	if calls < 2 || rec.fatal != want {
		t.Fatalf("after %d calls, failure %q, want %q", calls, rec.fatal, want)
	}
}
