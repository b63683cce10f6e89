package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// offsetFetch answers OffsetFetch, one group (v0–v7) or many (v8).
func (c *conn) offsetFetch(r *kmsg.OffsetFetchRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group = rg.Group
			var topics []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				topics = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range rg.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			res, code := c.fetchGroupOffsets(v, rg.Group, topics)
			og.ErrorCode = code
			for _, t := range res {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gt.Partitions = append(gt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition,
						Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
				}
				og.Topics = append(og.Topics, gt)
			}
			resp.Groups = append(resp.Groups, og)
		}
		return resp
	}
	topics := r.Topics
	if r.Version < 2 && topics == nil {
		topics = []kmsg.OffsetFetchRequestTopic{} // "all" arrived in v2
	}
	res, code := c.fetchGroupOffsets(v, r.Group, topics)
	resp.Topics = res
	if r.Version >= 2 {
		resp.ErrorCode = code
	} else if code != 0 {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	return resp
}

// fetchGroupOffsets reads one group's offsets: of the named topics, or of
// every topic it has commits for when topics is nil.
func (c *conn) fetchGroupOffsets(v *cellview.View, group string, topics []kmsg.OffsetFetchRequestTopic) ([]kmsg.OffsetFetchResponseTopic, int16) {
	var out []kmsg.OffsetFetchResponseTopic
	noCommit := func(p int32, code int16) kmsg.OffsetFetchResponseTopicPartition {
		op := kmsg.NewOffsetFetchResponseTopicPartition()
		op.Partition, op.Offset, op.LeaderEpoch, op.ErrorCode = p, -1, -1, code
		return op
	}
	groupErr := func(code int16) ([]kmsg.OffsetFetchResponseTopic, int16) {
		for _, rt := range topics {
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = rt.Topic
			for _, p := range rt.Partitions {
				ot.Partitions = append(ot.Partitions, noCommit(p, code))
			}
			out = append(out, ot)
		}
		return out, code
	}
	if !c.groupVisible(v, group) {
		return groupErr(catalog.GroupAccessDenied.KafkaCode)
	}
	var parts []groups.TopicPartition
	if topics != nil {
		parts = []groups.TopicPartition{}
		for _, rt := range topics {
			if t, ok := v.Topic(c.tenant(), rt.Topic); ok {
				for _, p := range rt.Partitions {
					parts = append(parts, groups.TopicPartition{TopicID: t.ID, Partition: p})
				}
			}
		}
	}
	got, err := c.coordinator().FetchOffsets(c.s.ctx, c.tenant(), group, parts)
	if err != nil {
		return groupErr(groupCode(err))
	}
	fill := func(t *wire.Topic, p int32) kmsg.OffsetFetchResponseTopicPartition {
		o, ok := got[groups.TopicPartition{TopicID: t.ID, Partition: p}]
		if !ok {
			return noCommit(p, 0)
		}
		op := noCommit(p, 0)
		op.Offset, op.LeaderEpoch = o.Offset, o.LeaderEpoch
		md := o.Metadata
		op.Metadata = &md
		return op
	}
	if topics == nil {
		byTopic := map[string][]int32{}
		for tp := range got {
			byTopic[tp.TopicID] = append(byTopic[tp.TopicID], tp.Partition)
		}
		for _, t := range v.Topics(c.tenant()) {
			ps, ok := byTopic[t.ID]
			if !ok || !c.describable(v, t.Name) {
				continue
			}
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = t.Name
			sortInt32(ps)
			for _, p := range ps {
				ot.Partitions = append(ot.Partitions, fill(t, p))
			}
			out = append(out, ot)
		}
		return out, 0
	}
	for _, rt := range topics {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = rt.Topic
		t, found := v.Topic(c.tenant(), rt.Topic)
		for _, p := range rt.Partitions {
			switch {
			case !found:
				ot.Partitions = append(ot.Partitions, noCommit(p, catalog.TopicNotFound.KafkaCode))
			case !c.describable(v, rt.Topic):
				ot.Partitions = append(ot.Partitions, noCommit(p, catalog.TopicAccessDenied.KafkaCode))
			default:
				ot.Partitions = append(ot.Partitions, fill(t, p))
			}
		}
		out = append(out, ot)
	}
	return out, 0
}

func sortInt32(s []int32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
