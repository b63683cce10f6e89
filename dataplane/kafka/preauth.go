package kafka

import (
	"context"
	"sync"
	"time"
)

// preAuthPlaces bounds the connections one client address holds before
// they authenticate (Config.MaxUnauthenticatedPerIP). A connection over the
// bound waits for a place, unread, for at most the auth timeout, as Kafka
// delays connections over its creation rate instead of refusing them: many
// clients behind one address that start together (a fleet restarted at
// once, a NAT) each authenticate in a few milliseconds and give their place
// to the next. Only Config.MaxWaitingPerIP may wait per address; the next
// is closed at once. A waiting connection costs a descriptor and a
// goroutine; its TLS handshake and reads start once it has a place.
type preAuthPlaces struct {
	limit   int // places per address; zero or less: no bound
	queue   int // connections that may wait per address
	mu      sync.Mutex
	held    map[string]int
	waiting map[string]int
	freed   map[string]chan struct{} // closed when a place of the address frees
}

func newPreAuthPlaces(limit, queue int) *preAuthPlaces {
	return &preAuthPlaces{limit: limit, queue: max(queue, 0),
		held: map[string]int{}, waiting: map[string]int{}, freed: map[string]chan struct{}{}}
}

// admit decides for a new unauthenticated connection c from host: it gets
// a place now (placed), must wait for one (await), or neither (refused).
func (p *preAuthPlaces) admit(c *conn, host string) (placed, wait bool) {
	if p.limit <= 0 {
		return true, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[host] < p.limit {
		p.held[host]++
		c.preAuthHost = host
		return true, false
	}
	if p.waiting[host] < p.queue {
		p.waiting[host]++
		return false, true
	}
	return false, false
}

// await waits, after admit said to, until c has a place among host's
// unauthenticated connections, for at most timeout or until ctx ends. It
// reports whether c got one.
func (p *preAuthPlaces) await(ctx context.Context, c *conn, host string, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.unwait(host)
	for p.held[host] >= p.limit {
		ch := p.freed[host]
		if ch == nil {
			ch = make(chan struct{})
			p.freed[host] = ch
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			p.mu.Lock()
			return false
		case <-ctx.Done():
			p.mu.Lock()
			return false
		}
		p.mu.Lock()
	}
	p.held[host]++
	c.preAuthHost = host
	return true
}

// unwait ends a wait admit counted; p.mu must be held.
func (p *preAuthPlaces) unwait(host string) {
	if p.waiting[host]--; p.waiting[host] <= 0 {
		delete(p.waiting, host)
	}
}

// abandon ends, without a place, the wait admit told c to start.
func (p *preAuthPlaces) abandon(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unwait(host)
}

// give gives back c's place, once: when it authenticates or ends. Every
// connection waiting for a place of the same address wakes to try.
func (p *preAuthPlaces) give(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	host := c.preAuthHost
	if host == "" {
		return
	}
	c.preAuthHost = ""
	if p.held[host]--; p.held[host] <= 0 {
		delete(p.held, host)
	}
	if ch := p.freed[host]; ch != nil {
		close(ch)
		delete(p.freed, host)
	}
}
