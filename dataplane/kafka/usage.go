package kafka

import (
	"context"
	"time"
)

// syncUsageWait bounds how long a connection waits, after a fetch
// response, for its usage to be committed (usage.Meter.Sync) before it
// reads its next request: past it the connection goes on, and the counts
// stay queued for the next flush. Produce does not wait: billing meters
// it from the partitions' logs (partition/meter.go).
const syncUsageWait = 5 * time.Second

// meterFetch counts what a fetch response sent: bytes out are the stored
// record-batch bytes it carried (the batches as appended, which bytes in
// counts too), messages out the offsets those batches span. fetch calls
// it only once the response is written to the connection, so a response
// lost before it (the client gone, the broker dying, a write error) is
// not billed, and a consumer that fetches it again is billed once. It
// reports whether it counted anything; the caller then syncs the counts
// before the connection's next request (syncUsage), so a crash loses at
// most the counts of responses written in the last moment before it: the
// customer-friendly direction.
func (c *conn) meterFetch(topics []fetchTopic) bool {
	u := c.s.cfg.Usage
	if u == nil {
		return false
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
	return counted
}

func (c *conn) syncUsage(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, syncUsageWait)
	defer cancel()
	_ = c.s.cfg.Usage.Sync(ctx)
}
