package toptenants

import (
	"slices"
	"testing"
	"time"
)

// TestTopSetBounded: with n=2, a third tenant is "other" while two are
// busier; when it becomes the busiest it gets its own label at the next
// recompute and the quietest is demoted (its series deleted).
func TestTopSetBounded(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(2, time.Second, func() time.Time { return now })
	var demoted []string
	l.OnDemote(func(t string) { demoted = append(demoted, t) })
	if got := l.Observe("a", 100); got != "a" {
		t.Fatalf("a: %q", got)
	}
	if got := l.Observe("b", 50); got != "b" {
		t.Fatalf("b: %q", got)
	}
	if got := l.Observe("c", 10); got != Other {
		t.Fatalf("c with the top set full: %q, want other", got)
	}
	if got := l.Observe("", 1); got != "none" {
		t.Fatalf("unauthenticated: %q", got)
	}
	for range 10 {
		l.Observe("c", 1000)
	}
	now = now.Add(2 * time.Second)
	if got := l.Observe("c", 1); got != "c" {
		t.Fatalf("c after it became the busiest: %q", got)
	}
	if !slices.Equal(demoted, []string{"b"}) {
		t.Fatalf("demoted %v, want [b]", demoted)
	}
	if got := l.Observe("b", 1); got != Other {
		t.Fatalf("b after demotion: %q", got)
	}
	if top := l.Top(); !slices.Equal(top, []string{"c", "a"}) {
		t.Fatalf("top %v", top)
	}
}
