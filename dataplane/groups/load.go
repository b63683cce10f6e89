package groups

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is the coordinator's goroutine: every CheckInterval it follows the
// leadership of the offsets partitions (loading those this broker comes
// to lead, dropping those it stops leading) and moves the groups' timers.
func (c *Coordinator) run() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.CheckInterval)
	defer t.Stop()
	for {
		c.check()
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
	}
}

func (c *Coordinator) check() {
	defer c.checks.Add(1)
	now := c.cfg.Now()
	for _, sh := range c.shards {
		l, ok := c.cfg.Offsets(sh.id)
		leads := false
		var epoch int32
		if ok {
			node, known := l.Leader()
			leads = known && node == c.cfg.NodeID
			epoch = l.LeaderEpoch()
		}
		sh.mu.Lock()
		switch {
		case !leads:
			if sh.status != shardNotLeader {
				c.cfg.Logger.Info("offsets partition no longer led here; its groups are dropped", "offsets_partition", sh.id, "epoch", sh.epoch)
				c.unload(sh)
			}
		case sh.status == shardNotLeader || sh.epoch != epoch:
			c.unload(sh)
			sh.status, sh.epoch, sh.log = shardLoading, epoch, l
			sess := sh.session
			c.wg.Add(1)
			go c.load(sh, l, sess, epoch)
		case sh.status == shardLoaded:
			c.startImports(sh, now)
			for k, g := range sh.groups {
				g.tick(now)
				if g.emptied && g.state == StateEmpty {
					g.emptied = false
					g.busy++
					c.wg.Add(1)
					go c.persistEmptied(sh, sh.session, k, g)
				} else if g.empty() {
					delete(sh.groups, k)
				} else if c.offsetsExpired(g, now) {
					g.expiring = true
					c.wg.Add(1)
					go c.expireOffsets(k)
				}
			}
		}
		sh.mu.Unlock()
	}
}

// unload drops a shard's groups, answering every waiting call with
// ErrNotCoordinator. sh.mu is held.
func (c *Coordinator) unload(sh *shard) {
	for _, g := range sh.groups {
		for _, m := range g.members {
			m.failWaits(ErrNotCoordinator)
		}
	}
	sh.groups, sh.imports = map[gkey]*group{}, nil
	sh.status, sh.log = shardNotLeader, nil
	sh.session++
}

// loadChunk is how much of an offsets partition one read takes.
const loadChunk = 1 << 20

// load replays an offsets partition this broker leads from its log start
// to its high watermark, across compaction's gaps (the barrier of the leader's term applied every
// earlier entry, so that is every commit any leader acknowledged) and
// installs the groups, unless leadership moved meanwhile. A failed load
// leaves the shard not loaded; the next check starts over.
func (c *Coordinator) load(sh *shard, l Log, sess uint64, epoch int32) {
	defer c.wg.Done()
	start := time.Now()
	groups, marks, records, err := c.replay(l)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.session != sess {
		return
	}
	if err != nil {
		c.cfg.Logger.Error("load offsets partition; will retry", "offsets_partition", sh.id, "epoch", epoch, "err", err)
		c.unload(sh)
		return
	}
	for k, g := range groups {
		if g.empty() {
			delete(groups, k)
		}
	}
	sh.groups, sh.imports, sh.status = groups, marks, shardLoaded
	c.cfg.Changed()
	c.cfg.Logger.Info("offsets partition loaded; coordinating its groups", "offsets_partition", sh.id, "epoch", epoch,
		"groups", len(groups), "records", records, "took", time.Since(start).Round(time.Millisecond))
}

// replay rebuilds the groups of an offsets partition, and its moving
// tenants' import markers, from its log.
func (c *Coordinator) replay(l Log) (map[gkey]*group, map[string]importMark, int, error) {
	groups := map[gkey]*group{}
	marks := map[string]importMark{}
	now := c.cfg.Now()
	off, hw := l.LogStartOffset(), l.HighWatermark()
	records := 0
	for off < hw {
		sl, _, err := l.Fetch(off, loadChunk)
		if err != nil {
			return nil, nil, records, fmt.Errorf("read offsets partition at %d: %w", off, err)
		}
		b, err := sl.AppendTo(nil)
		sl.Release()
		if err != nil {
			return nil, nil, records, fmt.Errorf("read offsets partition at %d: %w", off, err)
		}
		if len(b) == 0 {
			// The offsets partitions are compacted: a read from inside a
			// gap that reaches the high watermark (the newest records'
			// batches were superseded below it) is empty.
			break
		}
		next, err := eachRecord(b, func(offset int64, r kv) error {
			records++
			if err := applyRecord(groups, marks, now, c.cfg.InitialRebalanceDelay, r); err != nil {
				return fmt.Errorf("offset %d: %w", offset, err)
			}
			return nil
		})
		if err != nil {
			return nil, nil, records, err
		}
		if next <= off {
			return nil, nil, records, errors.New("offsets partition read made no progress")
		}
		off = next
	}
	return groups, marks, records, nil
}

// applyRecord applies one offsets-partition record to groups, or to marks
// for an import marker.
func applyRecord(groups map[gkey]*group, marks map[string]importMark, now time.Time, delay time.Duration, r kv) error {
	k, err := decodeKey(r.key)
	if err != nil {
		return err
	}
	if k.kind == kindImport {
		if r.value == nil {
			delete(marks, k.tenant)
			return nil
		}
		m, err := decodeImport(r.value)
		if err != nil {
			return err
		}
		marks[k.tenant] = m
		return nil
	}
	gk := gkey{k.tenant, k.group}
	g := groups[gk]
	if g == nil {
		if r.value == nil {
			return nil
		}
		g = newGroup(k.tenant, k.group, delay)
		groups[gk] = g
	}
	switch k.kind {
	case kindOffset:
		if r.value == nil {
			delete(g.offsets, k.tp)
			return nil
		}
		v, err := decodeOffset(r.value)
		if err != nil {
			return err
		}
		g.setOffset(k.tp, v)
	case kindGroup:
		if r.value == nil {
			delete(groups, gk)
			return nil
		}
		rec, err := decodeGroup(r.value)
		if err != nil {
			return err
		}
		g.restore(now, rec)
	}
	return nil
}

// backgroundWriteTimeout bounds a write the coordinator makes on its own
// (not for a caller): an emptied group's record, an expiry's tombstones.
const backgroundWriteTimeout = 30 * time.Second

// backgroundContext is the context of such a write: it ends after
// backgroundWriteTimeout or when the coordinator closes.
func (c *Coordinator) backgroundContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), backgroundWriteTimeout)
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// persistEmptied writes the group record of a group that became Empty
// (no members, a new generation), so that a later leader neither brings
// back its last members nor reuses its generation. It writes the state
// as of its turn at the group's write lock, and nothing if the group has
// members again by then (their SyncGroup writes it).
func (c *Coordinator) persistEmptied(sh *shard, sess uint64, k gkey, g *group) {
	defer c.wg.Done()
	g.wmu.Lock()
	defer g.wmu.Unlock()
	sh.mu.Lock()
	l, err := c.ready(sh)
	var rec groupRecord
	ok := err == nil && sh.session == sess && g.state == StateEmpty && len(g.members) == 0
	if ok {
		rec = g.record()
	}
	sh.mu.Unlock()
	if ok {
		ctx, cancel := c.backgroundContext()
		err = c.write(ctx, l, []kv{{key: encodeKey(recordKey{kind: kindGroup, tenant: k.tenant, group: k.group}), value: encodeGroup(rec)}})
		cancel()
		if err != nil {
			c.cfg.Logger.Warn("write emptied group; a new leader may restore its last members until their sessions expire",
				"tenant_id", k.tenant, "generation", rec.generation, "err", err)
		}
	}
	sh.mu.Lock()
	g.busy--
	sh.mu.Unlock()
}
