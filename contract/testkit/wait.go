package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it holds or timeout passes, then
// fails t naming what it waited for. It is the one bounded wait of both
// planes' tests: state is waited for, never slept for.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
