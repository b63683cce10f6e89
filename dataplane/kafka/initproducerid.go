package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// ProducerIDs hands out producer ids for idempotent producers, each at
// most once across the platform.
type ProducerIDs interface {
	Next(ctx context.Context) (int64, error)
}

// initProducerIDWait bounds an InitProducerId, which may have to fetch a
// new block from the control plane.
const initProducerIDWait = 10 * time.Second

// DefaultProducerIDBlock is how many ids a ProducerIDBlocks takes at once
// when its Size is unset.
const DefaultProducerIDBlock = 1000

// ProducerIDBlocks is a ProducerIDs that takes ids from the control plane
// in blocks (POST /internal/v1/cells/{cell}/producer-ids), so that an
// InitProducerId costs a control-plane call only once per block. Ids of
// a block not used up when the broker stops are never handed out.
type ProducerIDBlocks struct {
	// Allocate reserves n consecutive ids and returns the first, such as
	// (*client.Client).AllocateProducerIDs bound to the broker's cell.
	Allocate func(ctx context.Context, n int) (first int64, err error)
	// Size is the block size; default DefaultProducerIDBlock.
	Size int

	// mu guards the fields below and serializes allocations.
	mu        sync.Mutex
	next, end int64
}

// Next returns an unused id, taking a new block when this one is used up.
func (b *ProducerIDBlocks) Next(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next >= b.end {
		n := b.Size
		if n <= 0 {
			n = DefaultProducerIDBlock
		}
		first, err := b.Allocate(ctx, n)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		if first < 0 {
			return 0, fmt.Errorf("allocate producer ids: negative first id %d", first)
		}
		b.next, b.end = first, first+int64(n)
	}
	id := b.next
	b.next++
	return id, nil
}

// initProducerID gives an idempotent producer a new producer id at epoch
// 0. Every call allocates a new id: a producer that re-initializes (after
// an out-of-order or fenced error) starts over with fresh sequences, which
// no partition can confuse with its old ones. Transactions are not served.
func (c *conn) initProducerID(r *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		resp.ErrorCode, _ = entryCode(catalog.InvalidRequest, "transactions are not supported yet")
		return resp
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, initProducerIDWait)
	defer cancel()
	id, err := c.s.cfg.ProducerIDs.Next(ctx)
	if err != nil {
		c.s.cfg.Logger.Warn("init producer id failed", "remote", c.remote, "err", err)
		if errors.Is(err, context.Canceled) && c.s.ctx.Err() != nil {
			resp.ErrorCode = catalog.Unavailable.KafkaCode
			return resp
		}
		// Retriable: the client asks again.
		resp.ErrorCode = catalog.CoordinatorNotReady.KafkaCode
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
