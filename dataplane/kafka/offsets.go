package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/state"
)

// offsetCommit commits a group's offsets. Topic names are the caller's;
// offsets are stored by topic id, so a name of another tenant (or none)
// is UNKNOWN_TOPIC_OR_PARTITION, like any topic that does not exist.
func (c *conn) offsetCommit(r *kmsg.OffsetCommitRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	groupCodeAll := int16(0)
	if !c.groupAllowed(v, r.Group, authz.OpRead) {
		groupCodeAll = catalog.GroupAccessDenied.KafkaCode
	}
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
func (c *conn) fetchGroupOffsets(v *state.View, group string, topics []kmsg.OffsetFetchRequestTopic) ([]kmsg.OffsetFetchResponseTopic, int16) {
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
	if !c.groupAllowed(v, group, authz.OpRead) && !c.groupAllowed(v, group, authz.OpDescribe) {
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

// offsetDelete deletes a group's offsets of partitions its members do not
// consume (Kafka's OffsetDelete).
func (c *conn) offsetDelete(r *kmsg.OffsetDeleteRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !c.groupAllowed(v, r.Group, authz.OpDelete) {
		resp.ErrorCode = catalog.GroupAccessDenied.KafkaCode
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

// listGroups lists the caller's groups that this broker coordinates
// (clients ask every broker) and that the caller may describe.
func (c *conn) listGroups(r *kmsg.ListGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	states := map[string]bool{}
	for _, s := range r.StatesFilter {
		states[s] = true
	}
	for _, g := range c.coordinator().ListGroups(c.tenant()) {
		if len(states) > 0 && !states[g.State] {
			continue
		}
		if !c.groupAllowed(v, g.Group, authz.OpDescribe) && !c.groupAllowed(v, g.Group, authz.OpRead) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState = g.Group, g.ProtocolType, g.State
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func (c *conn) describeGroups(r *kmsg.DescribeGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		if !c.groupAllowed(v, name, authz.OpDescribe) && !c.groupAllowed(v, name, authz.OpRead) {
			dg.ErrorCode, dg.ErrorMessage = entryCode(catalog.GroupAccessDenied, "")
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		d, err := c.coordinator().DescribeGroup(c.tenant(), name)
		switch {
		case catalog.Has(err, catalog.GroupNotFound):
			dg.State = groups.StateDead
		case err != nil:
			dg.ErrorCode, dg.ErrorMessage = errCode(err)
		default:
			dg.State, dg.ProtocolType, dg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost, dm.ProtocolMetadata, dm.MemberAssignment = m.MemberID, m.ClientID, m.ClientHost, m.Metadata, m.Assignment
				if m.InstanceID != "" {
					id := m.InstanceID
					dm.InstanceID = &id
				}
				if dm.MemberAssignment == nil {
					dm.MemberAssignment = []byte{}
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *conn) deleteGroups(r *kmsg.DeleteGroupsRequest) kmsg.Response {
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var allowed []string
	for _, name := range r.Groups {
		if c.groupAllowed(v, name, authz.OpDelete) {
			allowed = append(allowed, name)
		}
	}
	outcome := c.coordinator().DeleteGroups(c.s.ctx, c.tenant(), allowed)
	for _, name := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		if err, ok := outcome[name]; ok {
			dg.ErrorCode = groupCode(err)
		} else {
			dg.ErrorCode = catalog.GroupAccessDenied.KafkaCode
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
