package wire

import (
	"errors"
	"fmt"
)

// A tenant move copies every partition of a tenant from its home cell (the
// source) to a cell of another pool (the destination), then hands the
// tenant over. The control plane drives it through the two cells' states;
// the brokers report what they did. The fields below are all added
// without a version bump: a broker that ignores them takes part in no
// move, and the control plane starts a move only between cells whose
// brokers all report MirrorStatus support (Report.Moves).
//
// The steps, as the two states say them:
//
//  1. Mirror: the source's state grants the destination cell the tenant's
//     topics (CellState.MirrorGrants); the destination's state lists each
//     topic with the source's partitions (same topic id, its own replica
//     placement) and Topic.Mirror naming the source. Destination replicas
//     open in mirror mode and pull from the source's leaders; their leaders
//     report PartitionStatus.Mirror.Lag.
//  2. Fence: the source's state marks the topics Fenced; the source leader
//     of each partition fences it (produce refused as not_leader from
//     then on) and reports MirrorStatus.Fenced with the final end. Setting
//     Fenced back to false before any promotion is the rollback.
//  3. Promote: once every source partition reports fenced, the
//     destination's state sets Mirror.Promote; each destination leader
//     promotes once it holds everything up to the fenced end, and reports
//     MirrorStatus.Promoted. The tenant's groups are held on the
//     destination (TenantMove.HoldGroups) from step 1 on. Once a state
//     with Promote is published the move can no longer be rolled back:
//     a destination leader may promote at any moment from then on.
//     Dropping Mirror before that cancels the destination: its replicas
//     delete their data (they stay deleted while the topic is listed
//     without a mirror).
//  4. Switch: the tenant's home becomes the destination. The source's
//     state drops the tenant, its keys, ACLs and topics (its brokers then
//     redirect the tenant's clients through the key-home lookup); the
//     destination's state drops Mirror from the topics.
//  5. Offsets: the source's coordinators report the tenant's final
//     committed offsets (Report.Groups, from a report whose StateVersion
//     is at least the switch's); the destination's state lists them in
//     TenantMove.GroupOffsets; its coordinators commit them and report
//     Report.OffsetsImported; once every offsets partition is covered the
//     destination's state clears HoldGroups and the move is done.
//
// While both cells serve the tenant (steps 1 to 5) the control plane splits
// the tenant's cell-wide quotas between the two states.

// TopicMirror, on a destination cell's topic, says its partitions are
// mirrors of the same topic on SourceCell.
type TopicMirror struct {
	SourceCell string `json:"source_cell"`
	// SourceBrokers are the source cell's brokers, as the destination's
	// brokers reach their Raft transports.
	SourceBrokers []MirrorBroker `json:"source_brokers"`
	// SourcePeerCA is the source cell's peer CA certificate in PEM: a
	// source broker's transport certificate must chain to it and name
	// SourceCell.
	SourcePeerCA string `json:"source_peer_ca"`
	// Promote: every source partition of the topic is fenced; each
	// destination leader promotes its partition once it holds everything
	// up to the fenced end.
	Promote bool `json:"promote,omitempty"`
	// BytesPerSec caps each partition's pull; 0 is the broker's default.
	BytesPerSec int64 `json:"bytes_per_sec,omitempty"`
}

// MirrorBroker is a source broker as a destination broker dials it.
type MirrorBroker struct {
	NodeID   int    `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
}

// MirrorStatus is, on a partition's leader only, where it stands in a
// tenant move: on the source, whether it is fenced and at which end; on the
// destination, how far its mirror is behind and whether it was promoted.
type MirrorStatus struct {
	Fenced    bool  `json:"fenced,omitempty"`
	FencedEnd int64 `json:"fenced_end,omitempty"`
	// Mirroring: this is a destination replica in mirror mode (not
	// promoted yet). Lag is the source's high watermark minus what was
	// mirrored, in offsets, as of the last pull; nil until its puller has
	// read the source's state (a mirror that has not looked is not
	// caught up, whatever it holds).
	Mirroring bool   `json:"mirroring,omitempty"`
	Lag       *int64 `json:"lag,omitempty"`
	// BytesPerSec is, while Mirroring, the rate limit its puller applies
	// (TopicMirror.BytesPerSec, or the broker's default when that is 0),
	// in bytes a second; 0 is unlimited.
	BytesPerSec int64  `json:"bytes_per_sec,omitempty"`
	Promoted    bool   `json:"promoted,omitempty"`
	Error       string `json:"error,omitempty"`
}

// TenantMove, on a tenant of either cell, marks the tenant as moving.
type TenantMove struct {
	Role string `json:"role"` // MoveSource or MoveDestination
	Peer string `json:"peer"` // the other cell's id
	// HoldGroups (destination): the coordinators answer the tenant's
	// group requests COORDINATOR_LOAD_IN_PROGRESS (Kafka's retriable 14;
	// HTTP 503 coordinator_not_available, retriable) until it is cleared.
	HoldGroups bool `json:"hold_groups,omitempty"`
	// GroupOffsets (destination): the tenant's final committed offsets on
	// the source, to commit before the groups are released. A coordinator
	// commits them for a group that has no commit of its own since. An
	// empty list (not null: a tenant without committed offsets) asks for an
	// import of nothing, acknowledged at once; null asks for none.
	GroupOffsets []CommittedOffset `json:"group_offsets"`
}

// Tenant move roles.
const (
	MoveSource      = "source"
	MoveDestination = "destination"
)

// CommittedOffset is one committed offset of a consumer group.
type CommittedOffset struct {
	Group     string `json:"group"`
	TopicID   string `json:"topic_id"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
}

// OffsetsImport is a destination broker's acknowledgement that the
// offsets partitions it leads hold the tenant's imported offsets.
type OffsetsImport struct {
	TenantID   string `json:"tenant_id"`
	Partitions []int  `json:"partitions"`
}

// Errors of a tenant move's fields.
var (
	ErrMoveRole   = errors.New("tenant move: role must be source or destination")
	ErrMovePeer   = errors.New("tenant move: empty peer cell")
	ErrMirrorCell = errors.New("topic mirror: empty source cell")
	ErrMirrorNone = errors.New("topic mirror: no source brokers")
)

// Validate checks a tenant's move marker.
func (m TenantMove) Validate() error {
	if m.Role != MoveSource && m.Role != MoveDestination {
		return fmt.Errorf("%w, not %q", ErrMoveRole, m.Role)
	}
	if m.Peer == "" {
		return ErrMovePeer
	}
	return nil
}

// Validate checks a topic's mirror: a source cell, brokers with node ids
// and addresses, and a PEM CA.
func (m TopicMirror) Validate() error {
	if m.SourceCell == "" {
		return ErrMirrorCell
	}
	if len(m.SourceBrokers) == 0 {
		return ErrMirrorNone
	}
	for i, b := range m.SourceBrokers {
		if b.NodeID <= 0 || b.RaftAddr == "" {
			return fmt.Errorf("topic mirror: source broker %d needs a node id and a Raft address", i)
		}
	}
	_, err := MirrorGrant{Cell: m.SourceCell, TenantID: "-", Topics: []string{"-"}, PeerCA: m.SourcePeerCA}.CAs()
	return err
}
