package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// The retriable codes a redirect session answers with. Each makes a client
// refresh its metadata (or look for its coordinator or controller again)
// and try elsewhere, and the redirect session's Metadata names only the
// brokers of the tenant's home cell.
var (
	// partitions: the client moves the partition to the leader Metadata
	// names.
	redirectPartition = catalog.NotLeader.KafkaCode
	// group requests: the client finds its coordinator again.
	redirectGroup = kerr.NotCoordinator.Code
	// FindCoordinator and ListGroups: ask another broker.
	redirectFind = catalog.CoordinatorNotReady.KafkaCode
	// topic admin and configs: the client asks the controller Metadata
	// names.
	redirectAdmin = kerr.NotController.Code
)

// redirectAnswer is a redirect session's answer to a request that this
// cell cannot serve for the tenant: the same request shape, every
// partition, group, topic or resource carrying a retriable error. Nil for
// a request it has no answer for (the connection is then closed, which
// also sends the client back to Metadata).
func redirectAnswer(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		out := resp.(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewProduceResponseTopic()
			ot.Topic, ot.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				op := kmsg.NewProduceResponseTopicPartition()
				op.Partition, op.ErrorCode, op.BaseOffset = p.Partition, redirectPartition, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.FetchRequest:
		out := resp.(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewFetchResponseTopic()
			ot.Topic, ot.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				op := kmsg.NewFetchResponseTopicPartition()
				op.Partition, op.ErrorCode = p.Partition, redirectPartition
				op.HighWatermark, op.LastStableOffset, op.LogStartOffset = -1, -1, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.ListOffsetsRequest:
		out := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewListOffsetsResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewListOffsetsResponseTopicPartition()
				op.Partition, op.ErrorCode, op.Offset, op.Timestamp = p.Partition, redirectPartition, -1, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.DeleteRecordsRequest:
		out := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewDeleteRecordsResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewDeleteRecordsResponseTopicPartition()
				op.Partition, op.ErrorCode, op.LowWatermark = p.Partition, redirectPartition, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		out := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				op.Partition, op.ErrorCode, op.LeaderEpoch, op.EndOffset = p.Partition, redirectPartition, -1, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewCreateTopicsResponseTopic()
			ot.Topic, ot.ErrorCode, ot.NumPartitions, ot.ReplicationFactor = t.Topic, redirectAdmin, -1, -1
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			ot := kmsg.NewDeleteTopicsResponseTopic()
			ot.Topic, ot.ErrorCode = kmsg.StringPtr(name), redirectAdmin
			out.Topics = append(out.Topics, ot)
		}
		for _, t := range r.Topics {
			ot := kmsg.NewDeleteTopicsResponseTopic()
			ot.Topic, ot.TopicID, ot.ErrorCode = t.Topic, t.TopicID, redirectAdmin
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewCreatePartitionsResponseTopic()
			ot.Topic, ot.ErrorCode = t.Topic, redirectAdmin
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.DescribeConfigsRequest:
		out := resp.(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			or := kmsg.NewDescribeConfigsResponseResource()
			or.ResourceType, or.ResourceName, or.ErrorCode = rr.ResourceType, rr.ResourceName, redirectAdmin
			out.Resources = append(out.Resources, or)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, rr := range r.Resources {
			or := kmsg.NewAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName, or.ErrorCode = rr.ResourceType, rr.ResourceName, redirectAdmin
			out.Resources = append(out.Resources, or)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range r.Resources {
			or := kmsg.NewIncrementalAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName, or.ErrorCode = rr.ResourceType, rr.ResourceName, redirectAdmin
			out.Resources = append(out.Resources, or)
		}
	case *kmsg.DescribeACLsRequest:
		resp.(*kmsg.DescribeACLsResponse).ErrorCode = redirectAdmin
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode = redirectAdmin
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		out := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, d := range r.Deletions {
			or := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			or.User, or.ErrorCode = d.Name, redirectAdmin
			out.Results = append(out.Results, or)
		}
		for _, u := range r.Upsertions {
			or := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			or.User, or.ErrorCode = u.Name, redirectAdmin
			out.Results = append(out.Results, or)
		}
	case *kmsg.CreateACLsRequest:
		out := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			or := kmsg.NewCreateACLsResponseResult()
			or.ErrorCode = redirectAdmin
			out.Results = append(out.Results, or)
		}
	case *kmsg.DeleteACLsRequest:
		out := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			or := kmsg.NewDeleteACLsResponseResult()
			or.ErrorCode = redirectAdmin
			out.Results = append(out.Results, or)
		}
	case *kmsg.FindCoordinatorRequest:
		out := resp.(*kmsg.FindCoordinatorResponse)
		out.ErrorCode, out.NodeID, out.Port = redirectFind, -1, -1
		for _, k := range r.CoordinatorKeys {
			oc := kmsg.NewFindCoordinatorResponseCoordinator()
			oc.Key, oc.ErrorCode, oc.NodeID, oc.Port = k, redirectFind, -1, -1
			out.Coordinators = append(out.Coordinators, oc)
		}
	case *kmsg.ListGroupsRequest:
		resp.(*kmsg.ListGroupsResponse).ErrorCode = redirectFind
	case *kmsg.JoinGroupRequest:
		out := resp.(*kmsg.JoinGroupResponse)
		out.ErrorCode, out.Generation, out.MemberID = redirectGroup, -1, r.MemberID
	case *kmsg.SyncGroupRequest:
		resp.(*kmsg.SyncGroupResponse).ErrorCode = redirectGroup
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = redirectGroup
	case *kmsg.LeaveGroupRequest:
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = redirectGroup
	case *kmsg.OffsetCommitRequest:
		out := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			ot := kmsg.NewOffsetCommitResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetCommitResponseTopicPartition()
				op.Partition, op.ErrorCode = p.Partition, redirectGroup
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	case *kmsg.OffsetFetchRequest:
		out := resp.(*kmsg.OffsetFetchResponse)
		out.ErrorCode = redirectGroup
		for _, t := range r.Topics { // v0 and v1 carry errors per partition only
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetFetchResponseTopicPartition()
				op.Partition, op.ErrorCode, op.Offset, op.LeaderEpoch = p, redirectGroup, -1, -1
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		for _, g := range r.Groups {
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group, og.ErrorCode = g.Group, redirectGroup
			out.Groups = append(out.Groups, og)
		}
	case *kmsg.DescribeGroupsRequest:
		out := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			og := kmsg.NewDescribeGroupsResponseGroup()
			og.Group, og.ErrorCode = g, redirectGroup
			out.Groups = append(out.Groups, og)
		}
	case *kmsg.DeleteGroupsRequest:
		out := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			og := kmsg.NewDeleteGroupsResponseGroup()
			og.Group, og.ErrorCode = g, redirectGroup
			out.Groups = append(out.Groups, og)
		}
	case *kmsg.OffsetDeleteRequest:
		resp.(*kmsg.OffsetDeleteResponse).ErrorCode = redirectGroup
	default:
		return nil
	}
	return resp
}
