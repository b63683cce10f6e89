package controlplane

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter keeps one token bucket per key (an email or a client address) and
// forgets buckets that have been full for a while, so memory stays bounded by
// the number of recent callers. Buckets live in this process's memory:
// each control plane instance limits on its own, so with N instances behind
// a load balancer the effective limit is up to N times the configured one
// (docs/operations.md, "Two or more control planes").
type limiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	// mu guards the fields below.
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

func newLimiter(every time.Duration, burst int, now func() time.Time) *limiter {
	return &limiter{every: every, burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token from every key's bucket and reports whether all had
// one; it returns how long to wait otherwise.
func (l *limiter) allow(keys ...string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	ok, wait := true, time.Duration(0)
	for _, k := range keys {
		b := l.buckets[k]
		if b == nil {
			b = rate.NewLimiter(rate.Every(l.every), l.burst)
			l.buckets[k] = b
		}
		if !b.AllowN(now, 1) {
			ok = false
			r := b.ReserveN(now, 1)
			if d := r.DelayFrom(now); d > wait {
				wait = d
			}
			r.CancelAt(now)
		}
	}
	return ok, wait
}

func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}
