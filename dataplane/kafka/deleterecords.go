package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

// deleteRecords moves each named partition's log start offset forward to
// the requested offset (-1: the high watermark) through its leader, which
// replicates the decision through Raft, and answers the new low watermark.
// It needs delete on the topic; a topic of another tenant is unknown; an
// offset above the high watermark is OFFSET_OUT_OF_RANGE and changes
// nothing. Partitions move independently and are waited for together.
func (c *conn) deleteRecords(r *kmsg.DeleteRecordsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	ctx, cancel := c.commitContext(r.TimeoutMillis)
	defer cancel()
	type job struct {
		part   Partition
		offset int64
		out    *kmsg.DeleteRecordsResponseTopicPartition
	}
	var jobs []job
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ot := &resp.Topics[i]
		ot.Default()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		ot.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			op := &ot.Partitions[j]
			op.Default()
			op.Partition = rp.Partition
			op.LowWatermark = -1
			fail := func(e *catalog.Entry) { op.ErrorCode = e.KafkaCode }
			switch {
			case !found || !hasPartition(t.Partitions, rp.Partition):
				fail(catalog.TopicNotFound)
				continue
			case !c.allowed(v, rt.Topic, authz.OpDelete):
				fail(catalog.TopicAccessDenied)
				continue
			}
			part, ok := c.s.cfg.Partitions.Get(t.ID, rp.Partition)
			if node, led := leaderOf(part, ok); !ok || !led || node != c.s.cfg.NodeID {
				fail(catalog.NotLeader)
				continue
			}
			jobs = append(jobs, job{part: part, offset: rp.Offset, out: op})
		}
	}
	run := func(j job) {
		low, err := j.part.DeleteRecords(ctx, j.offset)
		if err != nil {
			j.out.ErrorCode, _ = errCode(err)
			if ce := catalogued(err); ce.Entry == catalog.Internal {
				c.s.cfg.Logger.Error("delete records failed", "remote", c.remote, "err", err)
			}
			return
		}
		j.out.LowWatermark = low
	}
	runAll(jobs, run)
	return resp
}
