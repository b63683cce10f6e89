package api

import "time"

// ThrottleRequest puts a temporary quota on a tenant
// (PUT /v1/admin/tenants/{id}/throttle): each rate set caps the tenant's
// quota of that name until the throttle expires, then the tenant's own
// quotas apply again by themselves. At least one rate; rates > 0; the
// expiry in the future: either ExpiresAt or DurationSeconds.
type ThrottleRequest struct {
	ProduceBytesPerSec    *int64     `json:"produce_bytes_per_sec,omitempty"`
	ProduceMessagesPerSec *int64     `json:"produce_messages_per_sec,omitempty"`
	FetchBytesPerSec      *int64     `json:"fetch_bytes_per_sec,omitempty"`
	DurationSeconds       int64      `json:"duration_seconds,omitempty"`
	ExpiresAt             *time.Time `json:"expires_at,omitempty"`
	Reason                string     `json:"reason,omitempty"`
}

// Throttle is a tenant's temporary quota and the quotas its brokers
// enforce with it (Effective).
type Throttle struct {
	TenantID              string    `json:"tenant_id"`
	ProduceBytesPerSec    *int64    `json:"produce_bytes_per_sec"`
	ProduceMessagesPerSec *int64    `json:"produce_messages_per_sec"`
	FetchBytesPerSec      *int64    `json:"fetch_bytes_per_sec"`
	Reason                string    `json:"reason"`
	CreatedBy             string    `json:"created_by"`
	CreatedAt             time.Time `json:"created_at"`
	ExpiresAt             time.Time `json:"expires_at"`
	Effective             Quotas    `json:"effective"`
}
