package replicated

import "github.com/twmb/franz-go/pkg/kmsg"

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
