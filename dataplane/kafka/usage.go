package kafka

import (
	"context"
	"time"
)

// syncUsageWait bounds how long a fetch response waits for its usage to
// be committed (usage.Meter.Sync): past it the response goes, and the
// counts stay queued for the next flush. Produce does not wait: billing
// meters it from the partitions' logs (partition/meter.go).
const syncUsageWait = 5 * time.Second

// meterFetch counts the records a fetch response is about to send, then
// waits (boundedly) until the counts are in a usage partition.
func (c *conn) meterFetch(topics []fetchTopic) {
	u := c.s.cfg.Usage
	if u == nil {
		return
	}
	v := c.s.cfg.State.View()
	counted := false
	for _, ft := range topics {
		t, ok := v.Topic(c.tenant(), ft.name)
		if !ok {
			continue
		}
		for _, fp := range ft.parts {
			if fp.records.Size > 0 {
				u.Fetched(c.tenant(), t.ID, fp.records.Size, fp.records.NextOffset-fp.records.BaseOffset)
				counted = true
			}
		}
	}
	if counted {
		c.syncUsage(c.s.ctx)
	}
}

func (c *conn) syncUsage(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, syncUsageWait)
	defer cancel()
	_ = c.s.cfg.Usage.Sync(ctx)
}
