package httpapi

import (
	"context"
	"time"
)

// syncUsageWait bounds how long an answer waits for its usage to be
// committed (usage.Meter.Sync): past it the answer goes, and the counts
// stay queued for the next flush.
const syncUsageWait = 5 * time.Second

// meterRead counts what a read of topic id returns to the caller.
func (s *Server) meterRead(cl *caller, topicID string, rr *readResponse) {
	if s.cfg.Usage == nil || rr == nil || len(rr.Messages) == 0 {
		return
	}
	var size int64
	for _, m := range rr.Messages {
		size += int64(len(m.Key) + len(m.Value))
	}
	s.cfg.Usage.Fetched(cl.p.TenantID, topicID, size, int64(len(rr.Messages)))
}

// syncUsage waits, boundedly, until the usage counted so far is in a usage
// partition, so that an answer is never ahead of its metering.
func (s *Server) syncUsage(ctx context.Context) {
	if s.cfg.Usage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncUsageWait)
	defer cancel()
	_ = s.cfg.Usage.Sync(ctx)
}
