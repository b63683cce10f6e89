package transport

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLinkDown is returned (wrapped) by a send that Faults dropped or that
// crosses a partition. It stands for a lost request: Raft treats it like a
// timeout, only sooner.
var ErrLinkDown = errors.New("link down (fault injection)")

// Faults injects network faults between named brokers (Raft server ids) at
// runtime. One Faults value is shared by the Nodes of a test cell through
// Config.Faults; every method is safe for concurrent use and takes effect on
// the next send.
//
// Faults are applied by the sender of a request, before the request is
// queued: a dropped or partitioned request fails at once with ErrLinkDown,
// and a delayed request first waits out the round trip, delay(a→b) +
// delay(b→a), so that a response is never held up inside the shared
// connections (which would also delay other groups' traffic). Links are
// directed for SetDelay and SetDropRate; Partition and Isolate cut both
// directions.
//
// A nil *Faults, or one with nothing set, costs one atomic load per send.
type Faults struct {
	active atomic.Bool // true when any fault is set

	// mu guards the fields below.
	mu       sync.Mutex
	cut      map[link]bool
	isolated map[string]bool
	delay    map[link]time.Duration
	drop     map[link]float64
}

type link struct{ from, to string }

// NewFaults returns a Faults with nothing set.
func NewFaults() *Faults {
	return &Faults{
		cut:      map[link]bool{},
		isolated: map[string]bool{},
		delay:    map[link]time.Duration{},
		drop:     map[link]float64{},
	}
}

// Partition cuts the link between brokers a and b in both directions.
func (f *Faults) Partition(a, b string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut[link{a, b}] = true
	f.cut[link{b, a}] = true
	f.refresh()
}

// Isolate cuts every link to and from broker a.
func (f *Faults) Isolate(a string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isolated[a] = true
	f.refresh()
}

// SetDelay delays every request from a to b by d (0 removes the delay).
func (f *Faults) SetDelay(a, b string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		delete(f.delay, link{a, b})
	} else {
		f.delay[link{a, b}] = d
	}
	f.refresh()
}

// SetDropRate drops each request from a to b with probability p in [0, 1]
// (0 removes the fault).
func (f *Faults) SetDropRate(a, b string, p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p <= 0 {
		delete(f.drop, link{a, b})
	} else {
		f.drop[link{a, b}] = min(p, 1)
	}
	f.refresh()
}

// Heal removes every fault: partitions, isolations, delays and drops.
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cut)
	clear(f.isolated)
	clear(f.delay)
	clear(f.drop)
	f.refresh()
}

// refresh recomputes active; mu must be held.
func (f *Faults) refresh() {
	f.active.Store(len(f.cut)+len(f.isolated)+len(f.delay)+len(f.drop) > 0)
}

// check reports what to do with a request from -> to: an error to fail it
// with, or a delay to wait before sending it.
func (f *Faults) check(from, to string) (time.Duration, error) {
	if f == nil || !f.active.Load() {
		return 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isolated[from] || f.isolated[to] || f.cut[link{from, to}] {
		return 0, ErrLinkDown
	}
	if p := f.drop[link{from, to}]; p > 0 && rand.Float64() < p {
		return 0, ErrLinkDown
	}
	return f.delay[link{from, to}] + f.delay[link{to, from}], nil
}
