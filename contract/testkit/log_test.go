package testkit

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

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
