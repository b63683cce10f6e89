package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// offsetDelete deletes a group's offsets of partitions its members do not
// consume (Kafka's OffsetDelete).
func (c *conn) offsetDelete(r *kmsg.OffsetDeleteRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode = c.groupRefused(r.Group, authz.OpDelete); resp.ErrorCode != 0 {
		return resp
	}
	desc, err := c.coordinator().DescribeGroup(c.tenant(), r.Group)
	if err != nil {
		resp.ErrorCode = groupCode(err)
		return resp
	}
	subscribed := map[string]bool{}
	if desc.State != groups.StateEmpty && desc.ProtocolType == "consumer" {
		for _, m := range desc.Members {
			var md kmsg.ConsumerMemberMetadata
			if md.ReadFrom(m.Metadata) == nil {
				for _, t := range md.Topics {
					subscribed[t] = true
				}
			}
		}
	}
	var del []groups.TopicPartition
	for _, rt := range r.Topics {
		ot := kmsg.NewOffsetDeleteResponseTopic()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetDeleteResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !found || !hasPartition(t.Partitions, rp.Partition):
				op.ErrorCode = catalog.TopicNotFound.KafkaCode
			case !c.allowed(v, rt.Topic, authz.OpRead):
				op.ErrorCode = catalog.TopicAccessDenied.KafkaCode
			case subscribed[rt.Topic]:
				op.ErrorCode = catalog.GroupSubscribedToTopic.KafkaCode
			default:
				del = append(del, groups.TopicPartition{TopicID: t.ID, Partition: rp.Partition})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(del) > 0 {
		if err := c.coordinator().DeleteOffsets(c.s.ctx, c.tenant(), r.Group, del); err != nil {
			resp.ErrorCode = groupCode(err)
		}
	}
	return resp
}
