package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// A follower answers a produce with NOT_LEADER_OR_FOLLOWER naming the
// current leader, its epoch and its Kafka address (KIP-951), a Fetch v12
// the same with the leader in the tagged CurrentLeader, and Metadata from
// any broker names that leader.
func TestProduceToFollowerNamesLeader(t *testing.T) {
	c, tn := startCell(t, 1, "moves")
	l := c.cell.WaitLeader(0, 20*time.Second)
	leaderNode, followerNode := int32(l+1), int32((l+1)%3+1)
	cl := c.client(t, tn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	topic := "moves"
	meta := metadataRequest(topic)
	// A follower learns the leader from its first append, a moment after
	// the election WaitLeader saw; until then Metadata says
	// LEADER_NOT_AVAILABLE with leader -1. Wait until every broker knows.
	for node := int32(1); node <= 3; node++ {
		for {
			raw, err := cl.Broker(int(node)).Request(ctx, meta)
			if err != nil {
				t.Fatalf("metadata from node %d: %v", node, err)
			}
			mr := raw.(*kmsg.MetadataResponse)
			if len(mr.Brokers) != 3 || len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) != 1 {
				t.Fatalf("metadata from node %d: %d brokers, topics %+v", node, len(mr.Brokers), mr.Topics)
			}
			mp := mr.Topics[0].Partitions[0]
			if mp.ErrorCode == 0 && mp.Leader == leaderNode {
				break
			}
			if mp.ErrorCode != catalog.LeaderNotAvailable.KafkaCode || mp.Leader != -1 {
				t.Fatalf("metadata from node %d: leader %d, code %d; want leader %d", node, mp.Leader, mp.ErrorCode, leaderNode)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node %d never learned that node %d leads", node, leaderNode)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	raw, err := cl.Broker(int(followerNode)).Request(ctx, produceRequest(topic, 0, celltest.Batch([]byte("hello"))))
	if err != nil {
		t.Fatal(err)
	}
	pr := raw.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if pr.ErrorCode != catalog.NotLeader.KafkaCode || pr.CurrentLeader.LeaderID != leaderNode || pr.CurrentLeader.LeaderEpoch < 1 {
		t.Fatalf("produce to follower node %d: code %d, current leader %+v; want NOT_LEADER naming node %d", followerNode, pr.ErrorCode, pr.CurrentLeader, leaderNode)
	}
	brokers := raw.(*kmsg.ProduceResponse).Brokers
	if len(brokers) != 1 || brokers[0].NodeID != leaderNode {
		t.Fatalf("produce response endpoints %+v, want node %d's", brokers, leaderNode)
	}

	fr := kmsg.NewPtrFetchRequest()
	fr.Version, fr.ReplicaID, fr.MaxBytes = 12, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	raw, err = cl.Broker(int(followerNode)).Request(ctx, fr)
	if err != nil {
		t.Fatal(err)
	}
	fe := raw.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fe.ErrorCode != catalog.NotLeader.KafkaCode || fe.CurrentLeader.LeaderID != leaderNode || fe.CurrentLeader.LeaderEpoch < 1 {
		t.Fatalf("fetch v12 from follower node %d: code %d, current leader %+v; want NOT_LEADER naming node %d", followerNode, fe.ErrorCode, fe.CurrentLeader, leaderNode)
	}
}

// A leader fenced for its tenant's move answers a v10 produce with
// NOT_LEADER_OR_FOLLOWER naming itself at its own epoch: KIP-951 clients
// (franz-go) then retry here after their backoff instead of waiting for a
// metadata refresh that would name this broker again, and so reach the
// redirect to the new home as soon as the switch happens.
func TestFencedLeaderNamesItself(t *testing.T) {
	c, tn := startCell(t, 1, "fenced")
	l := c.cell.WaitLeader(0, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.cell.Replica(l, 0).Fence(ctx); err != nil {
		t.Fatal(err)
	}
	cl := c.client(t, tn)
	raw, err := cl.Broker(l+1).Request(ctx, produceRequest("fenced", 0, celltest.Batch([]byte("after the fence"))))
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ProduceResponse)
	pr := resp.Topics[0].Partitions[0]
	epoch := c.cell.Replica(l, 0).LeaderEpoch()
	if pr.ErrorCode != catalog.NotLeader.KafkaCode || pr.CurrentLeader.LeaderID != int32(l+1) || pr.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("produce to fenced leader node %d: code %d, current leader %+v; want NOT_LEADER naming node %d at epoch %d",
			l+1, pr.ErrorCode, pr.CurrentLeader, l+1, epoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != int32(l+1) {
		t.Fatalf("produce response endpoints %+v, want node %d's", resp.Brokers, l+1)
	}
}
