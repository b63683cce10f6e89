package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// A partition without a serving leader is LEADER_NOT_AVAILABLE with
// leader -1 in Metadata, which every Kafka client retries, never
// NOT_LEADER_OR_FOLLOWER (kafkajs's createTopics gives up on that). Here
// the partition has lost its majority: two of its three brokers are down,
// so a produce to it is NOT_ENOUGH_REPLICAS (retriable: no leader until
// brokers return), not the NOT_LEADER_OR_FOLLOWER of a moving leader,
// once the survivor's transport finds both peers down.
func TestMetadataWithoutLeaderIsLeaderNotAvailable(t *testing.T) {
	c, tn := startCell(t, 1, "orphan")
	l := c.cell.WaitLeader(0, 20*time.Second)
	survivor := (l + 1) % 3
	cl := c.client(t, tn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic := "orphan"
	meta := metadataRequest(topic)
	for b := range 3 { // every listener serving before two stop
		if _, err := cl.Broker(b+1).Request(ctx, meta); err != nil {
			t.Fatalf("metadata from node %d: %v", b+1, err)
		}
	}
	for b := range 3 {
		if b != survivor {
			c.kill(b)
		}
	}
	var mp kmsg.MetadataResponseTopicPartition
	celltest.WaitFor(t, 20*time.Second, "metadata without a leader", func() bool {
		mp = onePartitionMetadata(ctx, t, cl, int32(survivor+1), topic)
		return mp.ErrorCode != 0
	})
	if mp.ErrorCode != catalog.LeaderNotAvailable.KafkaCode || mp.Leader != -1 {
		t.Fatalf("metadata for a leaderless partition: code %d (%v), leader %d; want LEADER_NOT_AVAILABLE, -1", mp.ErrorCode, kerr.ErrorForCode(mp.ErrorCode), mp.Leader)
	}
	if !kerr.IsRetriable(kerr.ErrorForCode(mp.ErrorCode)) {
		t.Fatalf("code %d is not retriable for franz-go", mp.ErrorCode)
	}

	var pr kmsg.ProduceResponseTopicPartition
	celltest.WaitFor(t, 20*time.Second, "NOT_ENOUGH_REPLICAS from the survivor", func() bool {
		raw, err := cl.Broker(survivor+1).Request(ctx, produceRequest(topic, 0, celltest.Batch([]byte("x"))))
		if err != nil {
			t.Fatalf("produce to node %d: %v", survivor+1, err)
		}
		pr = raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		switch pr.ErrorCode {
		case catalog.NotEnoughReplicas.KafkaCode:
			return true
		case catalog.NotLeader.KafkaCode:
			return false
		}
		t.Fatalf("produce without a majority: code %d (%v), want NOT_ENOUGH_REPLICAS", pr.ErrorCode, kerr.ErrorForCode(pr.ErrorCode))
		return false
	})
	if !kerr.IsRetriable(kerr.ErrorForCode(pr.ErrorCode)) || pr.CurrentLeader.LeaderID >= 0 {
		t.Fatalf("produce without a majority: code %d retriable %v, current leader %+v; want retriable, no leader", pr.ErrorCode, kerr.IsRetriable(kerr.ErrorForCode(pr.ErrorCode)), pr.CurrentLeader)
	}
}
