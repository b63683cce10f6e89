// Package api holds the JSON shapes of the control plane's public /v1 API.
// The control plane serves them; the Go client, the console, the Terraform
// provider and tenantd admin consume them. It imports nothing of Sluice's.
package api

import "time"

// Error is the body of every non-2xx answer.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retriable bool   `json:"retriable,omitempty"`
}

// Page is one page of a list. An empty NextPageToken means the last page.
type Page[T any] struct {
	Items         []T    `json:"items"`
	NextPageToken string `json:"next_page_token,omitempty"`
}

// SignupRequest creates a tenant on a shared pool and its owner.
type SignupRequest struct {
	TenantName string `json:"tenant_name"`
	Email      string `json:"email"`
	Password   string `json:"password"`
	Plan       string `json:"plan,omitempty"` // free (default) or standard
}

// OnBehalfOfHeader names the API key a broker acts for on /v1: with the
// broker's cell key as the credential (Authorization: Basic <cell key
// id:secret>), the request is served as that key would be, with its role
// and ACLs, if the key is active and its tenant lives on the cell key's
// cell. Brokers use it for Kafka administration over SCRAM, which never
// sends the key's secret.
const OnBehalfOfHeader = "X-Sluice-On-Behalf-Of"

// SignupAccepted answers every well-formed signup, whether or not the
// email or tenant name is taken (POST /v1/signup, 202): what happens next
// is mailed to the address. A new address gets a token to confirm with
// (POST /v1/signup/confirm); a registered one, or a taken tenant name, gets
// the news instead.
type SignupAccepted struct {
	Status  string `json:"status"` // "pending"
	Message string `json:"message"`
}

// ConfirmSignupRequest finishes a signup with the mailed token.
type ConfirmSignupRequest struct {
	Token string `json:"token"`
}

// SignupResponse answers a confirmed signup with a session for the new
// owner (POST /v1/signup/confirm, 201).
type SignupResponse struct {
	Tenant  Tenant  `json:"tenant"`
	User    User    `json:"user"`
	Session Session `json:"session"`
}

// CreateTenantRequest creates another tenant for the signed-in user, who
// becomes its owner (POST /v1/tenants).
type CreateTenantRequest struct {
	Name string `json:"name"`
	Plan string `json:"plan,omitempty"` // free (default) or standard
}

// CreateTenantResponse answers POST /v1/tenants with the new tenant and a
// session of the caller on it; the caller's other sessions stay as they were.
type CreateTenantResponse struct {
	Tenant  Tenant  `json:"tenant"`
	Session Session `json:"session"`
}

// UserTenant is a tenant the signed-in user belongs to, with the user's
// role in it (GET /v1/tenants).
type UserTenant struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Plan   string `json:"plan"`
	Status string `json:"status"`
	Role   string `json:"role"`
}

// SessionRequest signs a user in. Tenant (id or name) is needed only when the
// user belongs to more than one tenant. A platform operator may instead send
// only APIKey, an operator API key as "id:secret", for a session that acts
// as that key (the console's operator sign-in).
type SessionRequest struct {
	Email    string `json:"email,omitempty"`
	Password string `json:"password,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
	APIKey   string `json:"api_key,omitempty"`
}

// Session is a bearer token for the API and console.
type Session struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	TenantID  string    `json:"tenant_id,omitempty"`
	Role      string    `json:"role"`
}

// Me describes the authenticated caller.
type Me struct {
	Kind       string `json:"kind"` // user or api_key
	UserID     string `json:"user_id,omitempty"`
	Email      string `json:"email,omitempty"`
	KeyID      string `json:"key_id,omitempty"`
	TenantID   string `json:"tenant_id,omitempty"`
	TenantName string `json:"tenant_name,omitempty"`
	Role       string `json:"role"`
	Operator   bool   `json:"operator"`
}

// User is a person who signs in.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// Tenant is an isolated customer of the service.
type Tenant struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Plan       string    `json:"plan"`
	Status     string    `json:"status"`
	PoolID     string    `json:"pool_id"`
	HomeCellID string    `json:"home_cell_id"`
	CreatedAt  time.Time `json:"created_at"`
}

// Cluster is what a client needs to connect: the tenant's bootstrap
// addresses for Kafka clients and the HTTP data API.
type Cluster struct {
	TenantID         string   `json:"tenant_id"`
	CellID           string   `json:"cell_id"`
	BootstrapServers []string `json:"bootstrap_servers"`
	HTTPEndpoints    []string `json:"http_endpoints"`
}

// APIKey is a tenant's credential for the data plane and the API. Secret is
// returned once, by create, and never again.
type APIKey struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Role        string     `json:"role"`
	Status      string     `json:"status"` // active, expired or revoked
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt  *time.Time `json:"last_used_at,omitempty"`
	Secret      string     `json:"secret,omitempty"`
}

// CreateAPIKeyRequest creates a key. Role defaults to developer and may not
// exceed the creator's own.
type CreateAPIKeyRequest struct {
	Description string     `json:"description,omitempty"`
	Role        string     `json:"role,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// Topic is a named, partitioned log of a tenant. Config holds the settings
// set explicitly; EffectiveConfig every setting with defaults filled in.
type Topic struct {
	Name              string            `json:"name"`
	Partitions        int               `json:"partitions"`
	ReplicationFactor int               `json:"replication_factor"`
	Config            map[string]string `json:"config"`
	EffectiveConfig   map[string]string `json:"effective_config"`
	Assignments       []Partition       `json:"assignments,omitempty"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
}

// Partition is one partition's placement: broker node ids, the first being
// the preferred leader; and what its brokers last reported of it (absent
// until a broker has): the leader (the node reported with the newest
// epoch) and that leader's log start offset, high watermark and size.
type Partition struct {
	Partition      int        `json:"partition"`
	Replicas       []int      `json:"replicas"`
	Leader         *int       `json:"leader,omitempty"`
	LeaderEpoch    *int64     `json:"leader_epoch,omitempty"`
	LogStartOffset *int64     `json:"log_start_offset,omitempty"`
	HighWatermark  *int64     `json:"high_watermark,omitempty"`
	SizeBytes      *int64     `json:"size_bytes,omitempty"`
	ReportedAt     *time.Time `json:"reported_at,omitempty"`
}

// CreateTopicRequest creates a topic; ValidateOnly checks without creating.
type CreateTopicRequest struct {
	Name         string            `json:"name"`
	Partitions   int               `json:"partitions,omitempty"` // default 1
	Config       map[string]string `json:"config,omitempty"`
	ValidateOnly bool              `json:"validate_only,omitempty"`
}

// UpdateTopicRequest grows partitions and changes config. A config key set
// to null returns to its default.
type UpdateTopicRequest struct {
	Partitions   *int               `json:"partitions,omitempty"`
	Config       map[string]*string `json:"config,omitempty"`
	ValidateOnly bool               `json:"validate_only,omitempty"`
}

// ACL allows or denies one API key (or "*", every key of the tenant) an
// operation on topics, groups or the cluster.
type ACL struct {
	ID           string    `json:"id"`
	Principal    string    `json:"principal"`
	ResourceType string    `json:"resource_type"`
	ResourceName string    `json:"resource_name"`
	PatternType  string    `json:"pattern_type"`
	Operation    string    `json:"operation"`
	Permission   string    `json:"permission"`
	CreatedAt    time.Time `json:"created_at"`
}

// CreateACLRequest creates an ACL.
type CreateACLRequest struct {
	Principal    string `json:"principal"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type,omitempty"` // literal (default) or prefixed
	Operation    string `json:"operation"`
	Permission   string `json:"permission,omitempty"` // allow (default) or deny
}

// Quotas are a tenant's limits; tenants read them, operators write them.
type Quotas struct {
	ProduceBytesPerSec    int64     `json:"produce_bytes_per_sec"`
	ProduceMessagesPerSec int64     `json:"produce_messages_per_sec"`
	FetchBytesPerSec      int64     `json:"fetch_bytes_per_sec"`
	MaxPartitions         int       `json:"max_partitions"`
	MaxTopics             int       `json:"max_topics"`
	MaxConnections        int       `json:"max_connections"`
	MaxStorageBytes       int64     `json:"max_storage_bytes"`
	MaxMessageBytes       int       `json:"max_message_bytes"`
	MaxRequestsPerSec     int       `json:"max_requests_per_sec"`
	MaxRetentionMs        int64     `json:"max_retention_ms"`
	UpdatedAt             time.Time `json:"updated_at,omitempty"`
}

// Member is a user's role in the caller's tenant.
type Member struct {
	UserID    string    `json:"user_id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// AddMemberRequest invites an address to the tenant with a role and an
// initial password, used only if the address has no account yet (POST
// /v1/members).
type AddMemberRequest struct {
	Email    string `json:"email"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

// MemberInvited answers every well-formed POST /v1/members alike (202),
// whether or not the address has an account or is a member: the address
// is mailed a token (AcceptInvitationRequest) or the news that it is a
// member already.
type MemberInvited struct {
	Status  string `json:"status"` // "invited"
	Message string `json:"message"`
}

// AcceptInvitationRequest accepts an invitation with its mailed token
// (POST /v1/invitations/accept).
type AcceptInvitationRequest struct {
	Token string `json:"token"`
}

// UpdateMemberRequest changes a member's role.
type UpdateMemberRequest struct {
	Role string `json:"role"`
}

// AdminTenant is a tenant as operators see it, with its load.
type AdminTenant struct {
	Tenant
	Topics     int `json:"topics"`
	Partitions int `json:"partitions"`
	ActiveKeys int `json:"active_keys"`
	// StoredBytes is what the tenant's partitions hold on disk, one
	// replica each, as the brokers last reported it.
	StoredBytes int64  `json:"stored_bytes"`
	Quotas      Quotas `json:"quotas"`
}

// UpdateTenantRequest changes a tenant's status or plan. A plan change resets
// the tenant's quotas to the plan's defaults.
type UpdateTenantRequest struct {
	Status *string `json:"status,omitempty"`
	Plan   *string `json:"plan,omitempty"`
}

// Pool is a set of cells, shared by many tenants or dedicated to one.
type Pool struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"` // shared or dedicated
	Description string    `json:"description"`
	Cells       int       `json:"cells"`
	CreatedAt   time.Time `json:"created_at"`
}

// CreatePoolRequest creates a pool.
type CreatePoolRequest struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Description string `json:"description,omitempty"`
}

// Cell is three brokers that replicate each other's partitions.
type Cell struct {
	ID           string    `json:"id"`
	PoolID       string    `json:"pool_id"`
	Status       string    `json:"status"`
	StateVersion int64     `json:"state_version"`
	Tenants      int       `json:"tenants"`
	Partitions   int       `json:"partitions"`
	Brokers      []Broker  `json:"brokers"`
	CreatedAt    time.Time `json:"created_at"`
}

// CreateCellRequest creates a cell in a pool.
type CreateCellRequest struct {
	ID     string `json:"id"`
	PoolID string `json:"pool_id"`
}

// Broker is one member of a cell.
type Broker struct {
	ID             string     `json:"id"`
	CellID         string     `json:"cell_id"`
	NodeID         int        `json:"node_id"`
	KafkaAddr      string     `json:"kafka_addr"`
	HTTPAddr       string     `json:"http_addr"`
	RaftAddr       string     `json:"raft_addr"`
	Status         string     `json:"status"`
	DiskUsedBytes  int64      `json:"disk_used_bytes"`
	DiskTotalBytes int64      `json:"disk_total_bytes"`
	DiskState      string     `json:"disk_state"` // ok, soft or hard, as last reported
	LastSeenAt     *time.Time `json:"last_seen_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
}

// CreateBrokerRequest adds a broker to a cell.
type CreateBrokerRequest struct {
	ID        string `json:"id"`
	CellID    string `json:"cell_id"`
	NodeID    int    `json:"node_id"`
	KafkaAddr string `json:"kafka_addr,omitempty"`
	HTTPAddr  string `json:"http_addr,omitempty"`
	RaftAddr  string `json:"raft_addr,omitempty"`
}

// UpdateBrokerRequest changes a broker's addresses or status.
type UpdateBrokerRequest struct {
	KafkaAddr *string `json:"kafka_addr,omitempty"`
	HTTPAddr  *string `json:"http_addr,omitempty"`
	RaftAddr  *string `json:"raft_addr,omitempty"`
	Status    *string `json:"status,omitempty"`
}

// CreateOperatorKeyRequest creates a platform-operator API key.
type CreateOperatorKeyRequest struct {
	Description string `json:"description,omitempty"`
}

// CellKey is the credential the brokers of a cell use for the internal cell
// API. Secret is returned once, by create.
type CellKey struct {
	ID     string `json:"id"`
	CellID string `json:"cell_id"`
	Secret string `json:"secret"`
}

// Group is a consumer group of the tenant with its total lag, from its
// coordinator's reports: only groups with committed offsets appear.
// Partitions is filled by GET /v1/groups/{group} only.
type Group struct {
	Group          string `json:"group"`
	PartitionCount int    `json:"partition_count"`
	// LagRecords and LagBytes are summed over the group's partitions;
	// MaxLagSeconds and MaxRetentionFraction are the largest of them.
	LagRecords           int64   `json:"lag_records"`
	LagBytes             int64   `json:"lag_bytes"`
	MaxLagSeconds        float64 `json:"max_lag_seconds"`
	MaxRetentionFraction float64 `json:"max_retention_fraction"`
	// Expired: on some partition retention deleted records the group had
	// not read.
	Expired bool `json:"expired"`
	// ReportedAt is the oldest report among the group's partitions.
	ReportedAt time.Time        `json:"reported_at"`
	Partitions []GroupPartition `json:"partitions,omitempty"`
}

// GroupPartition is one partition a group consumes, its committed offset
// and how far it is behind. A group lists every partition of the topics it
// committed on or its members subscribe to; one it has not committed on
// yet has CommittedOffset nil and lags by its whole retained log (high
// watermark − log start offset), what a consumer starting from the
// earliest offset would still read.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	// CommittedOffset is nil (JSON null) while the group has no committed
	// position on the partition.
	CommittedOffset *int64     `json:"committed_offset"`
	CommittedAt     *time.Time `json:"committed_at,omitempty"`
	// Measured is false when the reporting broker could not measure the
	// lag (it holds no replica of the partition); the fields below are
	// then zero.
	Measured       bool  `json:"measured"`
	HighWatermark  int64 `json:"high_watermark"`
	LogStartOffset int64 `json:"log_start_offset"`
	// LagRecords and LagBytes: retained records (and their log bytes) from
	// the committed offset to the high watermark.
	LagRecords int64 `json:"lag_records"`
	LagBytes   int64 `json:"lag_bytes"`
	// LagSeconds is the age of the oldest unconsumed record (0 when caught
	// up).
	LagSeconds float64 `json:"lag_seconds"`
	// RetentionFraction: LagSeconds/retention.ms or LagBytes/retention.bytes,
	// whichever is larger; at 1 retention may delete unread records.
	RetentionFraction float64 `json:"retention_fraction"`
	// Expired: the committed offset is below the log start; records were
	// deleted before the group read them.
	Expired    bool      `json:"expired"`
	ReportedAt time.Time `json:"reported_at"`
}
