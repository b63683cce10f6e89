// Package toptenants bounds the cardinality of per-tenant metric labels: the
// busiest N tenants of a broker get their own label value, every other
// tenant is counted under "other".
//
// A tenant's label is decided when its traffic is observed, from a decayed
// score of its recent traffic, and the top set is recomputed at most once
// per interval. A counter therefore never goes backwards: a tenant that
// enters the top set starts a new series from zero (its earlier traffic
// stays in "other"), and one that leaves it has its series deleted through
// the OnDemote callbacks, so the label values in use never exceed N+1.
// The broker's listeners (dataplane/kafka, dataplane/httpapi) import it;
// it imports nothing of the project.
package toptenants

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Other is the label value of the tenants outside the top set.
const Other = "other"

// Labels picks the label value of a tenant.
type Labels struct {
	n     int
	every time.Duration
	now   func() time.Time

	mu       sync.Mutex
	score    map[string]float64
	top      map[string]bool
	last     time.Time
	onDemote []func(tenant string)
}

// New keeps n tenants (at least 1) in the top set, recomputed at most once
// per every (at least a second). now is the clock (nil: time.Now).
func New(n int, every time.Duration, now func() time.Time) *Labels {
	if now == nil {
		now = time.Now
	}
	return &Labels{n: max(n, 1), every: max(every, time.Second), now: now,
		score: map[string]float64{}, top: map[string]bool{}}
}

// OnDemote registers fn, called (outside the lock) with every tenant that
// leaves the top set, to delete its series.
func (l *Labels) OnDemote(fn func(tenant string)) {
	l.mu.Lock()
	l.onDemote = append(l.onDemote, fn)
	l.mu.Unlock()
}

// Observe adds weight (e.g. 1 per request plus the bytes carried) to the
// tenant's score and returns its label value: the tenant itself while it
// is in the top set, else Other. An empty tenant (not authenticated) is
// labelled "none".
func (l *Labels) Observe(tenant string, weight float64) string {
	if tenant == "" {
		return "none"
	}
	l.mu.Lock()
	l.score[tenant] += weight
	var demoted []string
	if now := l.now(); now.Sub(l.last) >= l.every {
		demoted = l.recompute()
		l.last = now
	}
	label := Other
	if l.top[tenant] || (len(l.top) < l.n && l.admit(tenant)) {
		label = tenant
	}
	hooks := l.onDemote
	l.mu.Unlock()
	for _, t := range demoted {
		for _, fn := range hooks {
			fn(t)
		}
	}
	return label
}

// Label is the tenant's label value now, without counting traffic: for
// gauges (e.g. open connections) summed by label.
func (l *Labels) Label(tenant string) string {
	if tenant == "" {
		return "none"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.top[tenant] {
		return tenant
	}
	return Other
}

// admit puts tenant into a top set with room; l.mu is held.
func (l *Labels) admit(tenant string) bool {
	l.top[tenant] = true
	return true
}

// Top is the tenants of the top set, busiest first.
func (l *Labels) Top() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.top))
	for t := range l.top {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(l.score[b], l.score[a]), cmp.Compare(a, b)) })
	return out
}

// recompute picks the n highest scores as the new top set, halves every
// score (so the set follows recent traffic) and returns the tenants that
// left the set; l.mu is held.
func (l *Labels) recompute() []string {
	ranked := make([]string, 0, len(l.score))
	for t := range l.score {
		ranked = append(ranked, t)
	}
	slices.SortFunc(ranked, func(a, b string) int { return cmp.Or(cmp.Compare(l.score[b], l.score[a]), cmp.Compare(a, b)) })
	next := map[string]bool{}
	for _, t := range ranked[:min(l.n, len(ranked))] {
		next[t] = true
	}
	var demoted []string
	for t := range l.top {
		if !next[t] {
			demoted = append(demoted, t)
		}
	}
	l.top = next
	for t, s := range l.score {
		if s /= 2; s < 1 {
			delete(l.score, t)
		} else {
			l.score[t] = s
		}
	}
	return demoted
}
