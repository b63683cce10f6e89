package replicated

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// throttleCount is a franz-go hook counting the responses that carried a
// throttle (throttle_time_ms > 0) and their total time: a tenant within
// its quota should see none.
type throttleCount struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (c *throttleCount) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		c.n.Add(1)
		c.total.Add(int64(d))
	}
}
