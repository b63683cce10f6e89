package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestProduceThroughLeaderKillDetectedPerBroker: franz-go, with its
// default retry settings, produces to a partition while its leader's
// broker is killed, and no error reaches the application. The cell runs
// Raft timeouts of an hour, so the partition can only get a new leader
// through the transport's per-broker failure detection (a follower whose
// leader's broker stops answering probes campaigns at once); without it
// the producer would stall until the test's deadline. The longest interval
// without an acknowledgement around the kill is logged (target: under
// 2 s).
func TestProduceThroughLeaderKillDetectedPerBroker(t *testing.T) {
	const topic = "kill"
	c, tn := startCellWith(t, 1, topic, cellOptions{raft: hourRaft})
	dead := c.cell.WaitLeader(0, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.SASL(plain.Auth{User: tn.KeyID, Pass: tn.Secret}.AsMechanism()),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	produce := func() time.Time {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v (leader now %d)", err, c.cell.Leader(0))
		}
		return time.Now()
	}
	for range 50 {
		produce()
	}
	last := produce()
	t.Logf("50 acknowledged; killing broker %d", dead)
	killedAt := time.Now()
	c.kill(dead)
	var gap time.Duration
	for i := 0; i < 200 || time.Since(killedAt) < 3*time.Second; i++ {
		now := produce()
		gap = max(gap, now.Sub(last))
		last = now
	}
	if l := c.cell.Leader(0); l == dead || l < 0 {
		t.Fatalf("leader after the kill: broker %d", l)
	}
	t.Logf("broker %d (the leader) killed; longest interval without an acknowledgement %v", dead, gap)
}
