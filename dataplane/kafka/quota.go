package kafka

import (
	"context"
	"math"
	"time"
)

// Tenant isolation at the Kafka front door (Config.Admission). Kafka's
// rules: a request that was admitted is recorded in full, and the client
// then waits out its tenant's debt. Clients of KIP-219 versions (Produce
// v6+, Fetch v8+, and every other request) get the response at once with
// throttle_time_ms set and the connection is muted (no further request is
// read) for that long; older Produce and Fetch versions get their
// response delayed instead, since those clients do not wait by
// themselves. A single wait is capped by admission's MaxThrottle; the
// debt behind it is kept.

// requestThrottle counts an authenticated request against its tenant's
// request rate and returns the throttle it earns.
func (c *conn) requestThrottle(req *request) time.Duration {
	a, p := c.s.cfg.Admission, c.principal.Load()
	if a == nil || p == nil {
		return 0
	}
	switch req.key {
	case 17, 18, 36: // SASL and ApiVersions come before a tenant is known
		return 0
	}
	return a.Request(p.TenantID)
}

// kip219 reports whether the client waits out throttle_time_ms itself.
func kip219(req *request) bool {
	switch req.key {
	case 0:
		return req.version >= 6
	case 1:
		return req.version >= 8
	}
	return true
}

// throttleMillis is d as a throttle_time_ms field.
func throttleMillis(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min(math.Ceil(float64(d)/float64(time.Millisecond)), math.MaxInt32))
}

// respond writes a response with write, which must encode c.throttle as
// its throttle_time_ms: for a KIP-219 client it mutes the connection for
// the throttle after writing, for an older one it delays the write.
func (c *conn) respond(req *request, write func() error) error {
	d := c.throttle
	c.throttle = 0
	if !kip219(req) {
		if err := c.mute(d); err != nil {
			return err
		}
		d = 0
	}
	if err := write(); err != nil {
		return err
	}
	return c.mute(d)
}

// mute waits d, or until the listener closes, and counts the wait in
// c.muted: a throttle is the tenant's own debt, not the broker's latency,
// so the request latency metric leaves it out (it is counted in the
// throttle metric instead).
func (c *conn) mute(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	start := time.Now()
	defer func() { c.muted += time.Since(start) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.s.ctx.Done():
		return c.s.ctx.Err()
	}
}

// admitConnection counts an authenticated connection against its
// tenant's connection limit; the connection's release runs when it closes.
func (c *conn) admitConnection(tenant string) error {
	a := c.s.cfg.Admission
	if a == nil || c.release != nil {
		return nil
	}
	release, err := a.Connect(tenant)
	if err != nil {
		return err
	}
	c.release = release
	return nil
}

// releaseConnection gives back the connection's slot, if it took one.
func (c *conn) releaseConnection() {
	if c.release != nil {
		c.release()
	}
}

// checkProduce is admission's verdict on one partition's batch.
func (c *conn) checkProduce(size int) error {
	if a := c.s.cfg.Admission; a != nil {
		return a.CheckProduce(c.tenant(), size)
	}
	return nil
}

// recordProduce records the acknowledged bytes and records of a produce
// and adds their throttle to the request's.
func (c *conn) recordProduce(bytes, records int64) {
	c.s.rm.produced(c.metricsTenant(), records)
	if a := c.s.cfg.Admission; a != nil && bytes > 0 {
		c.throttle = max(c.throttle, a.RecordProduce(c.tenant(), bytes, records))
	}
}

// egressFetch waits for a fetch response's turn in the broker's egress
// budget, at most MaxEgressWait past the fetch's deadline (its MaxWait),
// then records its bytes and adds their throttle to the request's. When
// the turn does not come in time it reports late and records nothing: the
// response goes without records. An error means the server is closing.
func (c *conn) egressFetch(deadline time.Time, bytes int64) (late bool, err error) {
	a := c.s.cfg.Admission
	if a == nil || bytes <= 0 {
		return false, nil
	}
	ctx, cancel := context.WithDeadline(c.s.ctx, deadline.Add(c.s.cfg.MaxEgressWait))
	defer cancel()
	if err := a.Egress(ctx, c.tenant(), bytes); err != nil {
		if c.s.ctx.Err() != nil {
			return false, err
		}
		return true, nil
	}
	c.throttle = max(c.throttle, a.RecordFetch(c.tenant(), bytes))
	return false, nil
}
