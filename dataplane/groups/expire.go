package groups

import "time"

// offsetsExpired reports whether an empty group's offsets have outlived
// OffsetsRetention, counted from its last commit and from when this
// coordinator first saw it empty, whichever is later. It keeps emptySince
// up to date; sh.mu is held. A coordinator that takes over a partition
// starts the empty groups' clocks again, so offsets never expire early
// and at most one retention late per coordinator move.
func (c *Coordinator) offsetsExpired(g *group, now time.Time) bool {
	at, ok := c.offsetsExpire(g, now)
	return ok && !g.expiring && g.busy == 0 && !now.Before(at) && !now.Before(g.retryExpiry)
}

// offsetsExpire returns when g's offsets expire, and false while g is in
// use (members, joins, a rebalance) or keeps them forever. sh.mu is held.
func (c *Coordinator) offsetsExpire(g *group, now time.Time) (time.Time, bool) {
	if g.state != StateEmpty || len(g.members) > 0 || len(g.pending) > 0 {
		g.emptySince = time.Time{}
		return time.Time{}, false
	}
	if g.emptySince.IsZero() {
		g.emptySince = now
	}
	if c.cfg.OffsetsRetention < 0 {
		return time.Time{}, false
	}
	last := g.emptySince
	if g.lastCommit.After(last) {
		last = g.lastCommit
	}
	return last.Add(c.cfg.OffsetsRetention), true
}

// expireOffsets deletes the offsets and the record of group k if they
// are still expired at its turn at the group's write lock: a member may
// have joined, or a commit arrived, meanwhile.
func (c *Coordinator) expireOffsets(k gkey) {
	defer c.wg.Done()
	ctx, cancel := c.backgroundContext()
	defer cancel()
	var n int
	err := c.tombstone(ctx, k.tenant, k.group, func(g *group) ([]TopicPartition, bool, error) {
		defer func() { g.expiring = false }()
		now := c.cfg.Now()
		if at, ok := c.offsetsExpire(g, now); !ok || now.Before(at) {
			return nil, false, nil
		}
		var del []TopicPartition
		for tp := range g.offsets {
			del = append(del, tp)
		}
		n = len(del)
		return del, true, nil
	})
	if err != nil {
		c.cfg.Logger.Warn("expire the offsets of an empty group; will retry", "tenant_id", k.tenant, "err", err)
		c.retryExpiring(k)
		return
	}
	if n > 0 {
		c.cfg.Logger.Info("expired the offsets of an empty group", "tenant_id", k.tenant, "offsets", n,
			"retention", c.cfg.OffsetsRetention)
	}
}

// expiryRetry is how long a failed expiry waits before the next try.
const expiryRetry = 10 * time.Second

// retryExpiring lets a check try group k again after expiryRetry.
func (c *Coordinator) retryExpiring(k gkey) {
	sh := c.shardOf(k.tenant, k.group)
	sh.mu.Lock()
	if g := sh.groups[k]; g != nil {
		g.expiring, g.retryExpiry = false, c.cfg.Now().Add(expiryRetry)
	}
	sh.mu.Unlock()
}
