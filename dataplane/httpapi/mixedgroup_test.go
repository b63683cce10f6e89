package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMixedGroup: an HTTP member and a franz-go consumer (range
// balancer) share one consumer group: the partitions split between them
// and each gets the messages of its own.
func TestMixedGroup(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "shared", 4, nil)
	coordIdx := c.coordinator(tn, "mixed")
	jr := c.join(tn, coordIdx, "mixed", map[string]any{"topics": []string{"shared"}, "session_timeout_ms": 10000, "rebalance_timeout_ms": 20000})
	if len(jr.Partitions) != 4 {
		t.Fatalf("alone, the HTTP member has %+v", jr.Partitions)
	}

	assigned := make(chan map[string][]int32, 4)
	cons := c.kafkaClient(tn, kgo.ConsumerGroup("mixed"), kgo.ConsumeTopics("shared"), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(10*time.Second), kgo.RebalanceTimeout(20*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned <- m }))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	polled := make(chan map[int32]int, 1)
	go func() {
		got := map[int32]int{}
		for ctx.Err() == nil {
			cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Partition]++ })
			if len(got) > 0 && sum(got) >= 10 {
				break
			}
		}
		polled <- got
	}()

	// The HTTP member learns of the rebalance from a fetch and joins again.
	waitFor(t, "the HTTP member told to re-join", func() bool {
		s, _, _ := c.fetch(tn, coordIdx, "mixed", jr, 200)
		return s == http.StatusConflict
	})
	jr = c.join(tn, coordIdx, "mixed", map[string]any{"topics": []string{"shared"}, "member_id": jr.MemberID, "session_timeout_ms": 10000, "rebalance_timeout_ms": 20000})
	var kafkaParts []int32
	select {
	case m := <-assigned:
		kafkaParts = m["shared"]
	case <-ctx.Done():
		t.Fatal("the franz-go consumer got no assignment")
	}
	mine := map[int32]bool{}
	for _, p := range jr.Partitions {
		mine[p.Partition] = true
	}
	for _, p := range kafkaParts {
		if mine[p] {
			t.Fatalf("partition %d assigned to both: HTTP %+v, franz-go %v", p, jr.Partitions, kafkaParts)
		}
	}
	if len(jr.Partitions) != 2 || len(kafkaParts) != 2 {
		t.Fatalf("range over 2 members and 4 partitions: HTTP %+v, franz-go %v", jr.Partitions, kafkaParts)
	}

	// 20 messages, 5 per partition: each consumer gets its own.
	var req publishReq
	for p := range int32(4) {
		for range 5 {
			req.Messages = append(req.Messages, msg{Value: []byte("x"), Partition: ptr(p)})
		}
	}
	if s := c.as(tn, 0, http.MethodPost, publishPath("shared"), req, nil); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	httpGot := map[int32]int{}
	for sum(httpGot) < 10 && ctx.Err() == nil {
		s, fr, e := c.fetch(tn, coordIdx, "mixed", jr, 1000)
		if s != http.StatusOK {
			t.Fatalf("HTTP fetch: %d %+v", s, e)
		}
		for _, m := range fr.Messages {
			httpGot[m.Partition]++
		}
	}
	kafkaGot := <-polled
	for p, n := range httpGot {
		if !mine[p] || n != 5 {
			t.Errorf("HTTP member got %d messages of partition %d (its partitions: %v)", n, p, mine)
		}
	}
	for p, n := range kafkaGot {
		if mine[p] || n != 5 {
			t.Errorf("franz-go got %d messages of partition %d (its partitions: %v)", n, p, kafkaParts)
		}
	}
	if sum(httpGot) != 10 || sum(kafkaGot) != 10 {
		t.Fatalf("HTTP got %v, franz-go %v", httpGot, kafkaGot)
	}
}

func sum(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
