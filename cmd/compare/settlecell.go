package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
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
//
// The partitions still moving when it gave up are not waited for again
// (each later wait names them while they stay unsettled): one partition
// that never settles used to cost every later timed phase the whole limit.
func (c *sluiceCell) settleCell(ctx context.Context) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	for {
		moving, err := c.cellUnsettled(ctx, cl)
		if err != nil {
			return err
		}
		if !awaited(moving, c.stuck) {
			if d := time.Since(start); d >= time.Second {
				fmt.Fprintf(os.Stderr, "compare:   cell settled (every partition led by its preferred replica) after %v\n", d.Round(100*time.Millisecond))
			}
			if len(c.stuck) > 0 {
				fmt.Fprintf(os.Stderr, "compare:   not waited for again, still unsettled: %s\n", describeUnsettled(c.stuck))
			}
			return nil
		}
		if time.Since(start) > cellSettleLimit {
			fmt.Fprintf(os.Stderr, "compare:   cell not settled after %v, measuring anyway: %s\n", cellSettleLimit, describeUnsettled(moving))
			if c.stuck == nil {
				c.stuck = map[string]string{}
			}
			maps.Copy(c.stuck, moving)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// awaited drops from stuck the partitions that have settled, and reports
// whether any of moving is still to be waited for: one not in stuck.
func awaited(moving, stuck map[string]string) bool {
	maps.DeleteFunc(stuck, func(k, _ string) bool {
		_, still := moving[k]
		return !still
	})
	for k := range moving {
		if _, given := stuck[k]; !given {
			return true
		}
	}
	return false
}

// describeUnsettled names how many partition views are unsettled and the
// first of them in key order.
func describeUnsettled(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	if len(keys) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d partition views, first %s", len(keys), m[keys[0]])
}

// cellUnsettled returns the partitions that keep the cell from being
// settled, keyed by broker, topic and partition, each with what its
// broker reports.
func (c *sluiceCell) cellUnsettled(ctx context.Context, cl *kgo.Client) (map[string]string, error) {
	moving := map[string]string{}
	for node := int32(1); node <= 3; node++ {
		req := kmsg.NewPtrMetadataRequest() // no topics: all of them
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl.Broker(int(node)))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			moving[fmt.Sprintf("%d", node)] = fmt.Sprintf("metadata from broker %d: %v", node, err)
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
					moving[fmt.Sprintf("%d %s %d", node, *t.Topic, p.Partition)] = fmt.Sprintf("broker %d: %s/%d led by %d (error %d), preferred %v",
						node, *t.Topic, p.Partition, p.Leader, p.ErrorCode, p.Replicas)
				}
			}
		}
	}
	return moving, nil
}
