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
	WaitForState(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// WaitForState is WaitFor for a wait whose failure should show where
// things stood: cond returns whether it holds and what it saw, and the
// failure after timeout carries the last thing seen (a log, an error, a
// status), so a timed-out test says why without being rerun.
func WaitForState(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if seen == "" {
				t.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			t.Fatalf("timed out after %s waiting for %s; last seen:\n%s", timeout, what, seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
