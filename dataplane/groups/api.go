package groups

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/log"
)

// OffsetsTopicID is the topic id of the cell's internal offsets
// partitions. Tenants never see it: it is not a topic of any tenant's
// namespace, and topic ids are never accepted from clients.
const OffsetsTopicID = wire.OffsetsTopicID

// DefaultPartitions is the default number of offsets partitions of a
// cell.
const DefaultPartitions = wire.DefaultOffsetsPartitions

// DefaultOffsetsRetention is how long an empty group keeps its offsets by
// default: Kafka's offsets.retention.minutes, 7 days.
const DefaultOffsetsRetention = 7 * 24 * time.Hour

// Log is this broker's replica of one offsets partition, as the
// replication layer serves it (partition.Replica implements it).
type Log interface {
	// Produce appends one record batch and returns its base offset once a
	// majority of replicas has it durably.
	Produce(ctx context.Context, batch []byte) (int64, error)
	// Fetch returns committed whole batches from offset, bounded by the
	// high watermark, which it returns too.
	Fetch(offset int64, maxBytes int32) (log.Slice, int64, error)
	HighWatermark() int64
	LogStartOffset() int64
	// LeaderEpoch is the current leader epoch (Raft term).
	LeaderEpoch() int32
	// Leader is the serving leader's node id: this broker's once it won
	// an election and applied every earlier entry.
	Leader() (node int, ok bool)
}

// Protocol is one assignment protocol a member supports, with its
// metadata (for the consumer protocol: the subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a member's JoinGroup.
type JoinRequest struct {
	TenantID, Group, MemberID, InstanceID, ClientID, ClientHost, ProtocolType string
	SessionTimeout, RebalanceTimeout                                          time.Duration
	Protocols                                                                 []Protocol
	// RequireKnownMemberID (JoinGroup v4+, KIP-394): a new member without
	// an instance id first gets ErrMemberIDRequired with its member id in
	// the JoinResult, and joins again with it.
	RequireKnownMemberID bool
}

// Member is a member as the group's leader sees it in JoinResult: its
// metadata is for the protocol the group chose.
type Member struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata                                   []byte
}

// JoinResult answers a Join. Members is set for the leader only.
type JoinResult struct {
	Generation                                 int32
	ProtocolType, Protocol, LeaderID, MemberID string
	Members                                    []Member
}

// MemberIdentity names a member leaving: by member id, instance id, or
// both.
type MemberIdentity struct {
	MemberID, InstanceID string
}

// TopicPartition is a partition of a tenant's topic, by topic id (never
// by name: a name can be deleted and reused).
type TopicPartition struct {
	TopicID   string
	Partition int32
}

// OffsetCommit is one partition's offset to commit.
type OffsetCommit struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Committed is a committed offset.
type Committed struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommittedAt time.Time
}

// Kafka's group states.
const (
	StateEmpty               = "Empty"
	StatePreparingRebalance  = "PreparingRebalance"
	StateCompletingRebalance = "CompletingRebalance"
	StateStable              = "Stable"
	StateDead                = "Dead"
)

// GroupSummary is one line of ListGroups.
type GroupSummary struct {
	Group, ProtocolType, State string
}

// MemberDescription is a member as DescribeGroup shows it.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// GroupDescription is DescribeGroup's answer.
type GroupDescription struct {
	GroupSummary
	Protocol   string
	Generation int32
	Members    []MemberDescription
}

// CommittedOffset is one committed offset of any tenant's group, for lag
// reporting.
type CommittedOffset struct {
	TenantID, Group string
	TopicPartition
	Committed
}

// GroupSnapshot is one group a coordinator holds, for lag reporting: its
// description (members with their metadata for the group's protocol and,
// once Stable, their assignments; none while Empty) and its committed
// offsets.
type GroupSnapshot struct {
	TenantID string
	GroupDescription
	Offsets map[TopicPartition]Committed
}
