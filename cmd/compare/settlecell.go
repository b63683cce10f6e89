package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cellSettleLimit bounds settleCell: a cell that is still moving leaders
// after it is measured as it is, with a note.
const cellSettleLimit = 2 * time.Minute

// settleCell waits until every partition of every topic in the cell is
// led by its preferred replica as all three brokers see it, so that the
// recovery from an earlier phase's leader kills (elections of the killed
// broker's partitions, their transfers back, a restarted broker opening
// and catching up its replicas, which grow with every run's new topics)
// does not run into a timed phase. It reports on stderr how long that
// took, and gives up after cellSettleLimit with what was still moving.
func (c *sluiceCell) settleCell(ctx context.Context) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	var last error
	for {
		if last = c.cellUnsettled(ctx, cl); last == nil {
			if d := time.Since(start); d >= time.Second {
				fmt.Fprintf(os.Stderr, "compare:   cell settled (every partition led by its preferred replica) after %v\n", d.Round(100*time.Millisecond))
			}
			return nil
		}
		if time.Since(start) > cellSettleLimit {
			fmt.Fprintf(os.Stderr, "compare:   cell not settled after %v, measuring anyway: %v\n", cellSettleLimit, last)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cellUnsettled says what keeps the cell from being settled, or nil.
func (c *sluiceCell) cellUnsettled(ctx context.Context, cl *kgo.Client) error {
	moving := 0
	var first error
	for node := int32(1); node <= 3; node++ {
		req := kmsg.NewPtrMetadataRequest() // no topics: all of them
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl.Broker(int(node)))
		cancel()
		if err != nil {
			return fmt.Errorf("metadata from broker %d: %w", node, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
					moving++
					if first == nil {
						first = fmt.Errorf("broker %d: %s/%d led by %d (error %d), preferred %v", node, *t.Topic, p.Partition, p.Leader, p.ErrorCode, p.Replicas)
					}
				}
			}
		}
	}
	if moving > 0 {
		return fmt.Errorf("%d partition views not settled, first %w", moving, first)
	}
	return nil
}
