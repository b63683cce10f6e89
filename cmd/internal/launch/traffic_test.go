package launch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/dataplane/celltest/history"
)

// traffic is a franz-go idempotent producer writing unique values one at a
// time to a topic and one consumer group member reading it, both recorded
// in a history checker, until halt.
type traffic struct {
	chk  *history.Checker
	stop chan struct{}
	wg   sync.WaitGroup
	// mu guards the fields below.
	mu         sync.Mutex
	ackTimes   []time.Time
	produceErr error
	// groupLog keeps the group member's client log, shown when it read
	// nothing.
	groupLog tailBuffer
}

// startTraffic starts the producer, whose records each have delivery to
// be acknowledged, and the group member (group) on topic.
func (c *procCell) startTraffic(ctx context.Context, topic, group string, delivery time.Duration) *traffic {
	tr := c.startProducer(ctx, topic, delivery)
	tr.startGroup(ctx, c, topic, group)
	return tr
}

// startProducer starts only the producer of startTraffic; startGroup adds
// the group member.
func (c *procCell) startProducer(ctx context.Context, topic string, delivery time.Duration) *traffic {
	tr := &traffic{chk: history.New(), stop: make(chan struct{})}
	prod := c.kgo(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(delivery), kgo.ProducerLinger(5*time.Millisecond))
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-tr.stop:
				return
			default:
			}
			v := fmt.Sprintf("v%07d", i)
			r, err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(v[len(v)-2:]), Value: []byte(v)}).First()
			if err != nil {
				tr.mu.Lock()
				tr.produceErr = errors.Join(tr.produceErr, fmt.Errorf("produce %s: %w", v, err))
				tr.mu.Unlock()
				continue // indeterminate: it may have been appended
			}
			tr.chk.Acked(r.Partition, r.Offset, v)
			tr.mu.Lock()
			tr.ackTimes = append(tr.ackTimes, time.Now())
			tr.mu.Unlock()
		}
	}()
	return tr
}

// startGroup starts the group member, whose client logs into tr.groupLog.
func (tr *traffic) startGroup(ctx context.Context, c *procCell, topic, group string) {
	g := c.kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.WithLogger(kgo.BasicLogger(&tr.groupLog, kgo.LogLevelInfo, nil)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, p := range m[topic] {
				tr.chk.StartSessionAnywhere("member", p)
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			for _, p := range m[topic] {
				tr.chk.EndSession("member", p)
			}
		}))
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for {
			select {
			case <-tr.stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := g.PollFetches(pctx)
			pcancel()
			var recs []history.Record
			fs.EachRecord(func(r *kgo.Record) {
				recs = append(recs, history.Record{Part: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			})
			tr.chk.Polled("member", recs)
		}
	}()
}

// halt stops the producer and the group member and waits for them.
func (tr *traffic) halt() {
	close(tr.stop)
	tr.wg.Wait()
}

// longestGap is the longest interval without an acknowledgement between
// from and to.
func (tr *traffic) longestGap(from, to time.Time) time.Duration {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return longestGap(tr.ackTimes, from, to)
}

// check reads the topic to its end through a fresh client and fails t if
// the history violates the delivery contract or the group polled nothing.
func (tr *traffic) check(ctx context.Context, t *testing.T, c *procCell, topic string, parts int) history.Result {
	t.Helper()
	fin := c.kgo(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	finalRead(ctx, t, fin, tr.chk, topic, parts)
	res := tr.chk.Result()
	tr.mu.Lock()
	if tr.produceErr != nil {
		t.Logf("produces that failed (indeterminate, checked as such): %v", tr.produceErr)
	}
	tr.mu.Unlock()
	if !res.Valid() {
		t.Fatalf("the history violates the delivery contract: %+v", res.Examples)
	}
	if res.GroupRecords == 0 {
		t.Errorf("the group polled nothing; its client's log, last %d KiB:\n%s", tailKeep>>10, tr.groupLog.String())
	}
	return res
}

// topicID is a topic's id, read from the control plane's database (the
// tenant API names topics, the admin API ids).
func (c *procCell) topicID(ctx context.Context, name string) string {
	c.t.Helper()
	conn, err := pgx.Connect(ctx, c.db.URL)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id string
	if err := conn.QueryRow(ctx, `SELECT id FROM topics WHERE name = $1`, name).Scan(&id); err != nil {
		c.t.Fatalf("topic %s's id: %v", name, err)
	}
	return id
}

// waitNoReplica waits until broker i's data directory holds no partition
// of topicID.
func (c *procCell) waitNoReplica(ctx context.Context, i int, topicID string) error {
	return launch.WaitFor(ctx, fmt.Sprintf("broker %s's partition data deleted", c.specs[i].ID), time.Minute, func() error {
		dirs, err := filepath.Glob(filepath.Join(c.specs[i].DataDir, c.specs[i].ID, "replicas", topicID, "*"))
		if err != nil {
			return err
		}
		if len(dirs) > 0 {
			return fmt.Errorf("broker %s still holds %v", c.specs[i].ID, dirs)
		}
		return nil
	})
}

// waitMove waits until move id is in state want and returns the time.
func (c *procCell) waitMove(ctx context.Context, id int64, want string, limit time.Duration) error {
	return launch.WaitFor(ctx, fmt.Sprintf("move %d %s", id, want), limit, func() error {
		got, err := c.cp.Operator.AdminMove(ctx, id)
		if err != nil {
			return err
		}
		if got.State != want {
			return fmt.Errorf("move %d is %s: voters %v, non-voters %v, joining %+v", got.ID, got.State, got.Voters, got.Nonvoters, got.Joining)
		}
		return nil
	})
}

// waitGroupRead waits until the group member has polled more than n
// records (redeliveries count), and logs how long that took; it fails t,
// with the member's client log, if that takes over a minute.
func (tr *traffic) waitGroupRead(ctx context.Context, t *testing.T, n int, what string) {
	t.Helper()
	from := time.Now()
	if err := launch.WaitFor(ctx, fmt.Sprintf("the group polls more than %d records %s", n, what), time.Minute, func() error {
		if got := tr.chk.Result().GroupRecords; got <= n {
			return fmt.Errorf("%d polled", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; the group member's client log, last %d KiB:\n%s", err, tailKeep>>10, tr.groupLog.String())
	}
	t.Logf("the group polled more than %d records %s after %s", n, what, time.Since(from).Round(time.Millisecond))
}
