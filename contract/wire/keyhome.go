package wire

// KeyHomeRequest asks the control plane whether an API key that a broker's
// own cell does not know is valid, and where its tenant lives. The broker
// sends the secret the client presented; the control plane checks it, so
// no cell ever receives the key hashes of another cell's tenants.
type KeyHomeRequest struct {
	KeyID  string `json:"key_id"`
	Secret string `json:"secret"`
}

// Key home statuses.
const (
	// KeyValid: the secret is right, the key unexpired and its tenant
	// active; the rest of the answer is filled in.
	KeyValid = "valid"
	// KeyInvalid: no such key, a revoked key, or a wrong secret. The
	// broker answers exactly as for a wrong secret.
	KeyInvalid = "invalid"
	// KeyExpired: the secret is right but the key has expired.
	KeyExpired = "expired"
	// KeySuspended: the secret is right but the tenant is suspended.
	KeySuspended = "suspended"
)

// KeyHome is the control plane's answer to a KeyHomeRequest. Only a valid
// key gets more than its status: the tenant, the key's role, and the
// tenant's home cell with its brokers and the tenant's topics, enough for
// a Kafka Metadata answer that sends the client to that cell.
type KeyHome struct {
	Status   string      `json:"status"`
	TenantID string      `json:"tenant_id,omitempty"`
	Role     string      `json:"role,omitempty"`
	Cell     string      `json:"cell,omitempty"`
	Brokers  []HomeNode  `json:"brokers,omitempty"`
	Topics   []HomeTopic `json:"topics,omitempty"`
}

// HomeNode is a broker of the home cell, as Kafka clients reach it.
type HomeNode struct {
	NodeID    int    `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	// HTTPAddr is the broker's HTTP data API address, and HTTPScheme its
	// scheme, so another cell's HTTP data API can follow the tenant.
	HTTPAddr   string `json:"http_addr,omitempty"`
	HTTPScheme string `json:"http_scheme,omitempty"`
}

// HomeTopic is one of the tenant's topics. Describable says whether the
// key may learn its partitions (describe, read or write under the
// tenant's ACLs); a topic it may not describe carries no partitions.
type HomeTopic struct {
	Name        string          `json:"name"`
	Describable bool            `json:"describable"`
	Partitions  []HomePartition `json:"partitions,omitempty"`
}

// HomePartition is a partition with its replicas (node ids, the first is
// the preferred leader) and the leader its brokers last reported: Leader
// is 0 and LeaderEpoch -1 while none has been reported.
type HomePartition struct {
	Partition   int   `json:"partition"`
	Replicas    []int `json:"replicas"`
	Leader      int   `json:"leader"`
	LeaderEpoch int64 `json:"leader_epoch"`
}
