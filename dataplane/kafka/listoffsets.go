package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// Special timestamps of ListOffsets.
const (
	listLatest   = -1
	listEarliest = -2
	listMaxTime  = -3 // v7+: the record with the largest timestamp
)

func (c *conn) listOffsets(r *kmsg.ListOffsetsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ot := &resp.Topics[i]
		ot.Default()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		readable := found && c.describable(v, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			op.Timestamp, op.Offset, op.LeaderEpoch = -1, -1, -1
			fail := func(e *catalog.Entry) { op.ErrorCode = e.KafkaCode }
			part, ok := Partition(nil), false
			switch {
			case !found || !hasPartition(t.Partitions, rp.Partition):
				fail(catalog.TopicNotFound)
			case !readable:
				fail(catalog.TopicAccessDenied)
			default:
				part, ok = c.s.cfg.Partitions.Get(t.ID, rp.Partition)
				if node, led := leaderOf(part, ok); !ok || !led || node != c.s.cfg.NodeID {
					fail(catalog.NotLeader)
					ok = false
				} else if e := checkEpoch(r.Version >= 4, rp.CurrentLeaderEpoch, part.LeaderEpoch()); e != nil {
					fail(e)
					ok = false
				}
			}
			if ok {
				op.LeaderEpoch = part.LeaderEpoch()
				hw := part.HighWatermark()
				switch rp.Timestamp {
				case listLatest:
					op.Offset = hw
				case listEarliest:
					op.Offset = part.LogStartOffset()
				case listMaxTime:
					fail(catalog.UnsupportedVersion) // the max-timestamp lookup is not served yet
				default:
					off, found, err := part.OffsetForTimestamp(rp.Timestamp)
					switch {
					case err != nil:
						op.ErrorCode, _ = errCode(err)
					case found && off < hw:
						// The base offset of the first batch that holds a
						// newer record: at or before the first such record.
						op.Offset, op.Timestamp = off, rp.Timestamp
					}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
	}
	return resp
}

func leaderOf(p Partition, ok bool) (int, bool) {
	if !ok {
		return -1, false
	}
	return p.Leader()
}
