package controlplane_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
)

// TestIdleLongPollIsQuiet: an idle cell-state long-poll ends in the
// server's 304 even when the wait is longer than the client's usual HTTP
// timeout, and a poll its caller abandons is not logged as a failure (an
// idle `make run` used to log a broker WARN and a control-plane ERROR
// every 30 s).
func TestIdleLongPollIsQuiet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cell := e.cellClient().With(client.WithHTTPClient(&http.Client{Timeout: 500 * time.Millisecond}))
	st, _, err := cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, changed, err := cell.CellState(ctx, "cell-1", st.StateVersion, 1500*time.Millisecond)
	if err != nil || changed {
		t.Fatalf("idle long-poll longer than the client timeout: changed=%v err=%v, want a quiet 304", changed, err)
	}

	gone, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := cell.CellState(gone, "cell-1", st.StateVersion, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned long-poll: %v, want the caller's deadline", err)
	}
	testkit.WaitForState(t, 15*time.Second, "the server to notice the abandoned poll", func() (bool, string) {
		logs := e.logs.String()
		return strings.Contains(logs, "request abandoned by its caller"), logs
	})
	if strings.Contains(e.logs.String(), "request failed") {
		t.Fatalf("an abandoned long-poll was logged as a failure:\n%s", e.logs.String())
	}
}
