package testkit

import (
	"fmt"
	"log/slog"
	"os/exec"
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
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Log(args ...any) { r.lines = append(r.lines, fmt.Sprint(args...)) }

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
