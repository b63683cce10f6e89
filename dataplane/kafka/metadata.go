package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

func (c *conn) metadata(r *kmsg.MetadataRequest) kmsg.Response {
	c.awaitTopics(metadataNames(r)) // metadatawait.go
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	cluster := v.Cell
	resp.ClusterID = &cluster
	resp.ControllerID = int32(c.s.cfg.NodeID)
	for _, b := range v.Brokers {
		host, port, ok := splitKafkaAddr(b.KafkaAddr)
		if !ok {
			continue // a broker without a Kafka address yet
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = int32(b.NodeID), host, port
		resp.Brokers = append(resp.Brokers, mb)
	}
	all := metadataAllTopics(r)
	topics := c.metadataTopics(v, r, all)
	c.awaitLeaders(c.s.ctx, topics)
	if all {
		for _, t := range topics {
			resp.Topics = append(resp.Topics, c.topicMetadata(t))
		}
		return resp
	}
	for _, rt := range r.Topics {
		resp.Topics = append(resp.Topics, c.namedTopicMetadata(v, metadataTopicName(rt)))
	}
	return resp
}

// metadataAllTopics reports whether a Metadata request asks for every
// topic: a null list, or an empty one before v1. Both the cell's answer
// and a redirect session's read the request this way.
func metadataAllTopics(r *kmsg.MetadataRequest) bool {
	return r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
}

// metadataTopicName is the name a Metadata request's topic asks for ("" for
// a null name, which no topic has).
func metadataTopicName(rt kmsg.MetadataRequestTopic) string {
	if rt.Topic == nil {
		return ""
	}
	return *rt.Topic
}

// topicError is the Metadata answer for a topic that is not described,
// with the catalogue entry that says why.
func topicError(name string, e *catalog.Entry) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.ErrorCode, _ = entryCode(e, "")
	return mt
}

// metadataTopics are the topics a Metadata request asks for that the
// caller may describe.
func (c *conn) metadataTopics(v *cellview.View, r *kmsg.MetadataRequest, all bool) []*wire.Topic {
	var out []*wire.Topic
	if all {
		for _, t := range v.Topics(c.tenant()) {
			if c.describable(v, t.Name) {
				out = append(out, t)
			}
		}
		return out
	}
	for _, rt := range r.Topics {
		if rt.Topic == nil {
			continue
		}
		if t, ok := v.Topic(c.tenant(), *rt.Topic); ok && c.describable(v, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// namedTopicMetadata answers for one topic the client named. A topic of
// another tenant is never found: lookups are by (tenant, name).
func (c *conn) namedTopicMetadata(v *cellview.View, name string) kmsg.MetadataResponseTopic {
	t, ok := v.Topic(c.tenant(), name)
	if !ok {
		return topicError(name, catalog.TopicNotFound)
	}
	if !c.describable(v, name) {
		return topicError(name, catalog.TopicAccessDenied)
	}
	return c.topicMetadata(t)
}

func (c *conn) topicMetadata(t *wire.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	for _, wp := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(wp.Partition)
		mp.Leader, mp.LeaderEpoch = -1, -1
		if len(wp.Replicas) > 0 {
			mp.Leader = int32(wp.Replicas[0]) // the preferred leader, until a replica knows better
		}
		p, held := c.s.cfg.Partitions.Get(t.ID, int32(wp.Partition))
		if held {
			mp.LeaderEpoch = p.LeaderEpoch()
			if node, ok := p.Leader(); ok {
				mp.Leader = int32(node)
			} else {
				// No serving leader (an election, a leader still applying
				// its predecessor's entries, or no majority): Kafka's
				// LEADER_NOT_AVAILABLE with leader -1, which every client
				// retries after a metadata refresh. NOT_LEADER_OR_FOLLOWER
				// here makes kafkajs's createTopics fail.
				mp.Leader = -1
				mp.ErrorCode = catalog.LeaderNotAvailable.KafkaCode
			}
		}
		for _, n := range wp.Replicas {
			mp.Replicas = append(mp.Replicas, int32(n))
			// A broker that holds no replica of the partition cannot
			// tell; it lists every assigned one.
			if !held || p.InSync(n) {
				mp.ISR = append(mp.ISR, int32(n))
			}
			if held && p.Offline(n) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, int32(n))
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// maxMessageBytes is the topic's max.message.bytes (Kafka's default when
// the state does not say).
func maxMessageBytes(t *wire.Topic) int {
	if n, ok := topicspec.Config(t.Config).MaxMessageBytes(); ok {
		return n
	}
	return 1 << 20
}
