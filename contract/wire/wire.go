// Package wire holds the state the control plane and the brokers of a cell
// exchange: the cell's desired state (what brokers must serve) and the
// brokers' reports (what they observe). Both planes import it; it imports
// nothing of Sluice's.
//
// Version is bumped whenever the meaning of a field changes; a broker refuses
// state of a version it does not know.
package wire

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Version of the wire format.
const Version = 1

// CellState is everything a broker of a cell needs to serve its tenants,
// as of StateVersion (which only grows).
type CellState struct {
	Version      int      `json:"version"`
	Cell         string   `json:"cell"`
	StateVersion int64    `json:"state_version"`
	Brokers      []Broker `json:"brokers"`
	Tenants      []Tenant `json:"tenants"`
	Keys         []Key    `json:"keys"`
	ACLs         []ACL    `json:"acls"`
	Topics       []Topic  `json:"topics"`
	// Offsets places the cell's consumer-group offsets partitions when the
	// control plane has taken their placement over (to move them off a
	// drained broker); absent, every broker computes the default placement
	// itself (OffsetsPlacement), and the control plane,
	// when it publishes one, starts from exactly that placement.
	Offsets []Partition `json:"offsets,omitempty"`
	// MirrorGrants are the other cells that may mirror topics of this
	// cell's tenants (a tenant's move to another cell): only they, only
	// those topics, only the mirror read RPCs of the Raft transport. A
	// state without a grant revokes it. Added without a version bump: a
	// broker that ignores it admits no other cell, as before.
	MirrorGrants MirrorGrants `json:"mirror_grants,omitempty"`
	GeneratedAt  time.Time    `json:"generated_at"`
}

// MirrorGrant lets cell Cell mirror topics Topics (topic ids) of tenant
// TenantID from this cell. PeerCA is Cell's peer CA certificate in PEM:
// a client certificate chained to it and naming Cell is that cell's
// broker.
type MirrorGrant struct {
	Cell     string   `json:"cell"`
	TenantID string   `json:"tenant_id"`
	Topics   []string `json:"topics"`
	PeerCA   string   `json:"peer_ca"`
}

// Errors of decoding mirror grants (errors.Is).
var (
	ErrGrantNoCell     = errors.New("mirror grant: empty cell id")
	ErrGrantNoTenant   = errors.New("mirror grant: empty tenant id")
	ErrGrantNoTopics   = errors.New("mirror grant: no topics")
	ErrGrantBadTopic   = errors.New("mirror grant: empty or repeated topic id")
	ErrGrantBadCA      = errors.New("mirror grant: peer CA is not a PEM CA certificate")
	ErrGrantDuplicate  = errors.New("mirror grant: duplicate grant of a cell and tenant")
	ErrGrantCAConflict = errors.New("mirror grant: two peer CAs for one cell")
)

// MirrorGrants is a cell state's grants, checked as they are decoded:
// each grant complete with a parsable CA, at most one grant per cell and
// tenant, one CA per cell.
type MirrorGrants []MirrorGrant

// UnmarshalJSON decodes and validates grants.
func (gs *MirrorGrants) UnmarshalJSON(b []byte) error {
	var raw []MirrorGrant
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := MirrorGrants(raw).Validate(); err != nil {
		return err
	}
	*gs = raw
	return nil
}

// Validate checks grants as UnmarshalJSON does.
func (gs MirrorGrants) Validate() error {
	type pair struct{ cell, tenant string }
	seen := map[pair]bool{}
	cas := map[string]string{}
	for i, g := range gs {
		if err := g.Validate(); err != nil {
			return fmt.Errorf("mirror grant %d: %w", i, err)
		}
		k := pair{g.Cell, g.TenantID}
		if seen[k] {
			return fmt.Errorf("mirror grant %d (cell %q, tenant %q): %w", i, g.Cell, g.TenantID, ErrGrantDuplicate)
		}
		seen[k] = true
		if ca, ok := cas[g.Cell]; ok && ca != g.PeerCA {
			return fmt.Errorf("mirror grant %d (cell %q): %w", i, g.Cell, ErrGrantCAConflict)
		}
		cas[g.Cell] = g.PeerCA
	}
	return nil
}

// Validate checks one grant: ids present, topics distinct, PeerCA one or
// more PEM certificates, every one a CA.
func (g MirrorGrant) Validate() error {
	switch {
	case g.Cell == "":
		return ErrGrantNoCell
	case g.TenantID == "":
		return ErrGrantNoTenant
	case len(g.Topics) == 0:
		return ErrGrantNoTopics
	}
	topics := map[string]bool{}
	for _, t := range g.Topics {
		if t == "" || topics[t] {
			return fmt.Errorf("%w: %q", ErrGrantBadTopic, t)
		}
		topics[t] = true
	}
	_, err := g.CAs()
	return err
}

// CAs parses PeerCA.
func (g MirrorGrant) CAs() ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(g.PeerCA)
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: a %q block", ErrGrantBadCA, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrGrantBadCA, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%w: certificate %q is not a CA", ErrGrantBadCA, c.Subject.CommonName)
		}
		out = append(out, c)
	}
	if len(out) == 0 || len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: no certificate, or bytes that are not PEM", ErrGrantBadCA)
	}
	return out, nil
}

// Broker is a member of the cell.
type Broker struct {
	ID        string `json:"id"`
	NodeID    int    `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	HTTPAddr  string `json:"http_addr"`
	RaftAddr  string `json:"raft_addr"`
	Status    string `json:"status"`
}

// Tenant is a tenant homed on the cell, with its quotas.
type Tenant struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"` // active or suspended
	Plan   string `json:"plan"`
	Quotas Quotas `json:"quotas"`
	// Move marks a tenant in a move to or from another cell (tenantmove.go).
	Move *TenantMove `json:"move,omitempty"`
}

// Quotas are a tenant's cell-wide limits.
type Quotas struct {
	ProduceBytesPerSec    int64 `json:"produce_bytes_per_sec"`
	ProduceMessagesPerSec int64 `json:"produce_messages_per_sec"`
	FetchBytesPerSec      int64 `json:"fetch_bytes_per_sec"`
	MaxPartitions         int   `json:"max_partitions"`
	MaxTopics             int   `json:"max_topics"`
	MaxConnections        int   `json:"max_connections"`
	MaxStorageBytes       int64 `json:"max_storage_bytes"`
	MaxMessageBytes       int   `json:"max_message_bytes"`
	MaxRequestsPerSec     int   `json:"max_requests_per_sec"`
}

// Key is an unrevoked API key of a tenant on the cell. Only the secret's hash
// travels; brokers check SASL/PLAIN passwords against it.
type Key struct {
	ID         string     `json:"id"`
	TenantID   string     `json:"tenant_id"`
	Role       string     `json:"role"`
	SecretHash []byte     `json:"secret_hash"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	// Scram holds the key's SCRAM credentials, one per mechanism; absent
	// for keys made before SCRAM was served, which only PLAIN admits.
	// Added without a version bump: no existing field changed meaning, and
	// a broker that ignores it only serves PLAIN, as before.
	Scram []ScramCredential `json:"scram,omitempty"`
}

// ScramCredential is what a broker needs to check one SCRAM mechanism's
// proofs (RFC 5802): never the secret, nor anything a client could sign in
// with.
type ScramCredential struct {
	Mechanism  string `json:"mechanism"` // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// ACL is one access rule of a tenant.
type ACL struct {
	TenantID     string `json:"tenant_id"`
	Principal    string `json:"principal"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// Topic is a tenant's topic with its effective configuration and placement.
type Topic struct {
	ID       string            `json:"id"`
	TenantID string            `json:"tenant_id"`
	Name     string            `json:"name"`
	Config   map[string]string `json:"config"`
	// Explicit names the keys of Config the tenant set, sorted; the
	// others are defaults (DescribeConfigs tells them apart). Added
	// without a version bump: a broker that ignores it loses nothing but
	// that distinction.
	Explicit   []string    `json:"explicit,omitempty"`
	Partitions []Partition `json:"partitions"`
	// Mirror, on a destination cell, makes the partitions mirrors of the
	// same topic on another cell (tenantmove.go).
	Mirror *TopicMirror `json:"mirror,omitempty"`
	// Fenced, on a source cell, makes each partition's leader fence it
	// (refuse produce for good, and record its final end); false after
	// true, before the destination promoted, unfences (a rollback).
	Fenced bool `json:"fenced,omitempty"`
}

// Partition lists a partition's replicas by broker node id; the first is the
// preferred leader.
//
// During a replica move (Kafka's reassignment shape) Replicas is the union
// of the old and the new replica sets, Adding the brokers joining and
// Removing the brokers leaving, so the move's target is Replicas minus
// Removing. The partition's leader converges its Raft configuration toward
// the target: each joining broker first as a non-voter seeded from
// segments, promoted once caught up; leadership handed to a target broker
// before the last old one leaves; never fewer voters than the target has.
// A cancelled move is a new target (the old set). Both lists are empty
// outside a move. Added without a version bump: a broker that ignores them
// keeps the replica set it has, and the control plane starts a move only
// in a cell whose brokers all report Voters.
type Partition struct {
	Partition int   `json:"partition"`
	Replicas  []int `json:"replicas"`
	Adding    []int `json:"adding,omitempty"`
	Removing  []int `json:"removing,omitempty"`
}

// Target is the replica set a partition converges to: Replicas minus
// Removing, in Replicas' order (its first is the preferred leader).
func (p Partition) Target() []int {
	out := make([]int, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		removing := false
		for _, x := range p.Removing {
			removing = removing || x == r
		}
		if !removing {
			out = append(out, r)
		}
	}
	return out
}

// Report is what one broker observes, sent every few seconds.
type Report struct {
	Version        int    `json:"version"`
	BrokerID       string `json:"broker_id"`
	DiskUsedBytes  int64  `json:"disk_used_bytes"`
	DiskTotalBytes int64  `json:"disk_total_bytes"`
	// DiskState is the disk against the broker's watermarks: "ok", "soft"
	// or "hard"; empty from brokers that do not report it (taken as ok).
	DiskState  string            `json:"disk_state,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
	// Groups is the lag of every committed offset of the groups this
	// broker coordinates (all of them, every report); absent from brokers
	// that coordinate none.
	Groups []GroupLag `json:"groups,omitempty"`
	// KeysUsed are the API keys that authenticated on this broker (Kafka
	// or the HTTP data API) since its last report; the control plane sets
	// their last_used_at. Absent from brokers that do not track them.
	KeysUsed []string `json:"keys_used,omitempty"`
	// HTTPScheme is the scheme the broker's HTTP data API serves: "https"
	// when it has a certificate, "http" otherwise; empty from brokers that
	// do not report it (taken as http). /v1/cluster lists its endpoints
	// with it.
	HTTPScheme string `json:"http_scheme,omitempty"`
	// StateVersion is the cell state version this broker had applied
	// when it made the report; 0 from brokers that do not report it.
	StateVersion int64 `json:"state_version,omitempty"`
	// Moves: this broker takes part in tenant moves (serves mirrors,
	// fences, promotes, reports PartitionStatus.Mirror).
	Moves bool `json:"moves,omitempty"`
	// OffsetsImported acknowledges a moving tenant's GroupOffsets in the
	// offsets partitions this broker leads.
	OffsetsImported []OffsetsImport `json:"offsets_imported,omitempty"`
}

// PartitionStatus is one replica's view of its partition.
type PartitionStatus struct {
	TopicID        string `json:"topic_id"`
	Partition      int    `json:"partition"`
	LeaderNode     int    `json:"leader_node"`
	LeaderEpoch    int64  `json:"leader_epoch"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	SizeBytes      int64  `json:"size_bytes"`
	// BehindLogStart: this replica is stuck behind the leader's log start
	// (it missed records retention or DeleteRecords removed) and serves
	// neither produce nor fetch until it is seeded again.
	BehindLogStart bool `json:"behind_log_start,omitempty"`
	// Voters and Nonvoters are the Raft configuration this replica holds
	// (its latest, committed or not), by broker node id; reported by
	// brokers that move replicas.
	Voters    []int `json:"voters,omitempty"`
	Nonvoters []int `json:"nonvoters,omitempty"`
	// Joining is, on the leader only, how far each non-voter (a replica
	// being added by a move) is behind it.
	Joining []JoinStatus `json:"joining,omitempty"`
	// Mirror is, on the leader only, the partition's part in a tenant move.
	Mirror *MirrorStatus `json:"mirror,omitempty"`
}

// JoinStatus is one joining replica's distance from the leader.
type JoinStatus struct {
	Node int `json:"node"`
	// BytesBehind is the log bytes between the joiner's last known offset
	// and the leader's log end (segment bytes still to seed, then
	// entries); EntriesBehind the Raft entries.
	BytesBehind   int64  `json:"bytes_behind"`
	EntriesBehind uint64 `json:"entries_behind"`
}

// GroupLag is one partition a consumer group consumes, its committed
// offset and how far it is behind, measured by the group's coordinator
// against its own replica of the partition. Brokers report every partition
// of the topics a group committed on or its members subscribe to; on one
// without a commit, CommittedOffset is -1 (Kafka's "no offset", which a
// commit of -1 also means) and CommittedAt is zero.
type GroupLag struct {
	TenantID        string    `json:"tenant_id"`
	Group           string    `json:"group"`
	TopicID         string    `json:"topic_id"`
	Partition       int       `json:"partition"`
	CommittedOffset int64     `json:"committed_offset"`
	CommittedAt     time.Time `json:"committed_at"`
	// Measured is false when the broker holds no replica of the partition;
	// the fields below are then zero.
	Measured       bool  `json:"measured"`
	HighWatermark  int64 `json:"high_watermark"`
	LogStartOffset int64 `json:"log_start_offset"`
	// LagRecords and LagBytes count the retained records from the committed
	// offset (or the log start, if later) to the high watermark.
	LagRecords int64 `json:"lag_records"`
	LagBytes   int64 `json:"lag_bytes"`
	// LagSeconds is the age of the oldest unconsumed record; 0 when caught up.
	LagSeconds float64 `json:"lag_seconds"`
	// RetentionFraction is how near retention is to deleting unconsumed
	// records: the larger of LagSeconds/retention.ms and
	// LagBytes/retention.bytes; at least 1 once records were deleted unread.
	RetentionFraction float64 `json:"retention_fraction"`
	// Expired: the committed offset is below the log start, so records
	// were deleted before the group read them.
	Expired bool `json:"expired"`
}

// ProducerIDBlock is a range of producer ids [First, First+Count) that one
// broker may hand to idempotent producers; no other broker gets any of them.
type ProducerIDBlock struct {
	First int64 `json:"first"`
	Count int   `json:"count"`
}
