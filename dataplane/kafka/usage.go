package kafka

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncUsageWait bounds how long a response waits for its usage to be
// committed (usage.Meter.Sync): past it the response goes, and the counts
// stay queued for the next flush.
const syncUsageWait = 5 * time.Second

// meterProduce counts the batches of r that resp acknowledges as
// appended here, then waits (boundedly) until the counts are in a usage
// partition, so that no acknowledgement is ahead of its metering.
func (c *conn) meterProduce(ctx context.Context, r *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) {
	u := c.s.cfg.Usage
	if u == nil {
		return
	}
	v := c.s.cfg.State.View()
	for i := range r.Topics {
		t, ok := v.Topic(c.tenant(), r.Topics[i].Topic)
		if !ok {
			continue
		}
		for j, rp := range r.Topics[i].Partitions {
			op := &resp.Topics[i].Partitions[j]
			if op.ErrorCode != 0 || op.BaseOffset < 0 || len(rp.Records) < 61 {
				continue
			}
			u.Produced(c.tenant(), t.ID, rp.Partition, op.BaseOffset, int64(len(rp.Records)), int64(binary.BigEndian.Uint32(rp.Records[57:])))
		}
	}
	c.syncUsage(ctx)
}

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
