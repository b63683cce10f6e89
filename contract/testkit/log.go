package testkit

import (
	"log/slog"
	"strings"
	"testing"
)

// Logger returns a logger that sends the lines at level and above to t's
// log, one t.Log call a line, so they show beside the test that wrote
// them. It is the one test logger of both planes' tests.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: level}))
}

// testLog writes each log line through t, without its newline.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
