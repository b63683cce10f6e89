// Package wire holds the state the control plane and the brokers of a cell
// exchange: the cell's desired state (what brokers must serve) and the
// brokers' reports (what they observe). Both planes import it; it imports
// nothing of Sluice's.
//
// Version is bumped whenever the meaning of a field changes; a broker refuses
// state of a version it does not know.
package wire

import "time"

// Version of the wire format.
const Version = 1

// CellState is everything a broker of a cell needs to serve its tenants,
// as of StateVersion (which only grows).
type CellState struct {
	Version      int       `json:"version"`
	Cell         string    `json:"cell"`
	StateVersion int64     `json:"state_version"`
	Brokers      []Broker  `json:"brokers"`
	Tenants      []Tenant  `json:"tenants"`
	Keys         []Key     `json:"keys"`
	ACLs         []ACL     `json:"acls"`
	Topics       []Topic   `json:"topics"`
	GeneratedAt  time.Time `json:"generated_at"`
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
	ID         string            `json:"id"`
	TenantID   string            `json:"tenant_id"`
	Name       string            `json:"name"`
	Config     map[string]string `json:"config"`
	Partitions []Partition       `json:"partitions"`
}

// Partition lists a partition's replicas by broker node id; the first is the
// preferred leader.
type Partition struct {
	Partition int   `json:"partition"`
	Replicas  []int `json:"replicas"`
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
}

// ProducerIDBlock is a range of producer ids [First, First+Count) that one
// broker may hand to idempotent producers; no other broker gets any of them.
type ProducerIDBlock struct {
	First int64 `json:"first"`
	Count int   `json:"count"`
}
