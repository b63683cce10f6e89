package admission

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/quotas"
)

// egress paces fetch responses at the broker's egress budget and orders
// them across tenants by deficit round robin (quotas.DRR), weighted by
// plan.
//
// Contention is defined by the budget: while the responses waiting to be
// sent need more bytes than the budget has left, they queue, and the DRR
// picks which tenant's response goes next, so every tenant with fetches
// waiting gets bytes in proportion to its weight, however large or
// frequent another tenant's responses are. Without contention a response
// passes at once (the budget's bucket is not in debt). The budget is
// record-then-pace: a response is granted when the bucket is not in debt
// and its bytes are then taken, so one response larger than the burst
// still goes and the next waits out the debt.
type egress struct {
	rate    float64 // bytes per second; 0 = no budget
	burst   float64
	now     func() time.Time
	kick    chan struct{}
	stopped chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	drr     *quotas.DRR
	waiting map[string][]*egressWaiter // FIFO per tenant, in DRR order
	tokens  float64                    // may be negative: the debt
	last    time.Time
	closed  bool
}

type egressWaiter struct {
	ch        chan struct{} // closed when granted
	cancelled bool          // guarded by egress.mu
}

func newEgress(rate float64, quantum int64, now func() time.Time) *egress {
	burst := rate / 10 // 100ms of budget
	return &egress{rate: rate, burst: burst, now: now, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		drr: quotas.NewDRR(quantum), waiting: map[string][]*egressWaiter{}, tokens: burst, last: now()}
}

func (e *egress) setWeight(id string, w int) {
	e.mu.Lock()
	e.drr.SetWeight(id, w)
	e.mu.Unlock()
}

func (e *egress) remove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drr.Remove(id)
	for _, w := range e.waiting[id] {
		close(w.ch) // let them go: the tenant is gone, its fetch fails on its own
	}
	delete(e.waiting, id)
}

// wait blocks until a response of cost bytes for tenant id may be sent.
func (e *egress) wait(ctx context.Context, id string, cost int64) error {
	if e.rate <= 0 || cost <= 0 {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	w := &egressWaiter{ch: make(chan struct{})}
	e.drr.Enqueue(id, cost)
	e.waiting[id] = append(e.waiting[id], w)
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		e.mu.Lock()
		w.cancelled = true
		e.mu.Unlock()
		return ctx.Err()
	case <-e.stopped:
		return nil
	}
}

// run grants waiting responses in DRR order, each once the budget is out
// of debt, until ctx ends; then it releases every waiter.
func (e *egress) run(ctx context.Context) {
	defer func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stopped)
	}()
	if e.rate <= 0 {
		<-ctx.Done()
		return
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		e.mu.Lock()
		now := e.now()
		e.tokens = min(e.burst, e.tokens+now.Sub(e.last).Seconds()*e.rate)
		e.last = now
		var wait time.Duration
		if e.tokens < 0 {
			wait = time.Duration(-e.tokens / e.rate * float64(time.Second))
		} else if id, cost, ok := e.drr.Next(); ok {
			q := e.waiting[id]
			w := q[0]
			if len(q) == 1 {
				delete(e.waiting, id)
			} else {
				e.waiting[id] = q[1:]
			}
			if !w.cancelled {
				e.tokens -= float64(cost)
			}
			close(w.ch)
			e.mu.Unlock()
			continue
		} else {
			wait = -1 // idle until kicked
		}
		e.mu.Unlock()
		var tc <-chan time.Time
		if wait >= 0 {
			timer.Reset(max(wait, time.Millisecond))
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
			if tc != nil && !timer.Stop() {
				<-timer.C
			}
		case <-tc:
		}
	}
}
