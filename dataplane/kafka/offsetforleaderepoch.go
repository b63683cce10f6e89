package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// offsetForLeaderEpoch lets a consumer check, after a leader change, that
// the records it read were not truncated: it gets the end offset of the
// epoch of its last record.
func (c *conn) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		visible := found && c.describable(v, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition, op.LeaderEpoch, op.EndOffset = rp.Partition, -1, -1
			switch {
			case !found || !hasPartition(t.Partitions, rp.Partition):
				op.ErrorCode = catalog.TopicNotFound.KafkaCode
			case !visible:
				op.ErrorCode = catalog.TopicAccessDenied.KafkaCode
			default:
				part, ok := c.s.cfg.Partitions.Get(t.ID, rp.Partition)
				if node, led := leaderOf(part, ok); !led || node != c.s.cfg.NodeID {
					op.ErrorCode = catalog.NotLeader.KafkaCode
					break
				}
				if e := checkEpoch(r.Version >= 2, rp.CurrentLeaderEpoch, part.LeaderEpoch()); e != nil {
					op.ErrorCode = e.KafkaCode
					break
				}
				epoch, end, ok, err := part.EpochEnd(rp.LeaderEpoch)
				switch {
				case err != nil:
					op.ErrorCode, _ = errCode(err)
				case ok:
					op.LeaderEpoch, op.EndOffset = epoch, end
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
