package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// offsetCommit commits a group's offsets. Topic names are the caller's;
// offsets are stored by topic id, so a name of another tenant (or none)
// is UNKNOWN_TOPIC_OR_PARTITION, like any topic that does not exist.
func (c *conn) offsetCommit(r *kmsg.OffsetCommitRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	groupCodeAll := c.groupRefused(r.Group, authz.OpRead)
	generation, member := r.Generation, r.MemberID
	if r.Version == 0 {
		generation, member = -1, ""
	}
	type slot struct{ t, p int }
	var commits []groups.OffsetCommit
	var slots []slot
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		ot := &resp.Topics[i]
		ot.Default()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		for j, rp := range rt.Partitions {
			op := kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case groupCodeAll != 0:
				op.ErrorCode = groupCodeAll
			case !found || !hasPartition(t.Partitions, rp.Partition):
				op.ErrorCode = catalog.TopicNotFound.KafkaCode
			case !c.allowed(v, rt.Topic, authz.OpRead):
				op.ErrorCode = catalog.TopicAccessDenied.KafkaCode
			case rp.Metadata != nil && len(*rp.Metadata) > 4096:
				op.ErrorCode = catalog.OffsetMetadataTooLarge.KafkaCode
			default:
				epoch := int32(-1)
				if r.Version >= 6 {
					epoch = rp.LeaderEpoch
				}
				commits = append(commits, groups.OffsetCommit{TopicPartition: groups.TopicPartition{TopicID: t.ID, Partition: rp.Partition},
					Offset: rp.Offset, LeaderEpoch: epoch, Metadata: deref(rp.Metadata)})
				slots = append(slots, slot{i, j})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
	}
	if len(commits) > 0 {
		code := groupCode(c.coordinator().CommitOffsets(c.s.ctx, c.tenant(), r.Group, member, deref(r.InstanceID), generation, commits))
		for _, s := range slots {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = code
		}
	}
	return resp
}
