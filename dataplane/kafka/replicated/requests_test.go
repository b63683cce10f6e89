package replicated

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The raw requests below are for tests that send one request to one
// broker (or one session) and check exactly what it answers, which a
// client would retry or route away from.

// produceRequest is a v10 produce (acks all, 5 s timeout) of records to
// one partition: v10 so that a refusal names the current leader and its
// address (KIP-951).
func produceRequest(topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 10, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// metadataRequest asks for the metadata of the topics named; with none it
// asks for every topic (a null list, not an empty one).
func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	return req
}

// onePartitionMetadata asks node for topic's metadata, which must hold
// that one topic of one partition, and returns the partition's.
func onePartitionMetadata(ctx context.Context, t *testing.T, cl *kgo.Client, node int32, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	raw, err := cl.Broker(int(node)).Request(ctx, metadataRequest(topic))
	if err != nil {
		t.Fatalf("metadata from node %d: %v", node, err)
	}
	mr := raw.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || len(mr.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata from node %d: topics %+v", node, mr.Topics)
	}
	return mr.Topics[0].Partitions[0]
}

// listOffsetsRequest asks for one partition's offset at timestamp (-1
// for the high watermark, -2 for the log start).
func listOffsetsRequest(topic string, partition int32, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
