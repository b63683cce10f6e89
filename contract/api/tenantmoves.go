package api

import "time"

// TenantMove is a tenant's move from its home cell to a cell of another
// pool (/v1/admin/tenant-moves). State is mirroring, fencing, promoting,
// switching, offsets, done or cancelled; only a move before promoting can
// be cancelled.
type TenantMove struct {
	ID           int64  `json:"id"`
	TenantID     string `json:"tenant_id"`
	SourceCellID string `json:"source_cell_id"`
	DestCellID   string `json:"dest_cell_id"`
	PoolID       string `json:"pool_id"`
	State        string `json:"state"`
	// Error is what holds the move back as the control plane last saw it
	// (a partition's mirror error, a source broker not yet past the
	// switch); empty when nothing does.
	Error string `json:"error,omitempty"`
	// SwitchVersion is the source cell's state version that dropped the
	// tenant; absent before the switch.
	SwitchVersion *int64 `json:"switch_version,omitempty"`
	// GroupOffsets is how many committed offsets the destination imports;
	// OffsetsImported the destination offsets partitions that acknowledged
	// them.
	GroupOffsets    int   `json:"group_offsets"`
	OffsetsImported []int `json:"offsets_imported"`
	// BytesPerSec is the most the move copies from the source cell a
	// second, over all its partitions; PartitionBytesPerSec each
	// partition's equal share of it (0 for a move without partitions: a
	// cancelled move's are dropped). A BytesPerSec of 0 leaves each
	// partition at the destination brokers' default (tenantd
	// -mirror-rate).
	BytesPerSec          int64                 `json:"bytes_per_sec"`
	PartitionBytesPerSec int64                 `json:"partition_bytes_per_sec"`
	Partitions           []TenantMovePartition `json:"partitions"`
	CreatedBy            string                `json:"created_by"`
	CreatedAt            time.Time             `json:"created_at"`
	UpdatedAt            time.Time             `json:"updated_at"`
	FinishedAt           *time.Time            `json:"finished_at,omitempty"`
}

// TenantMovePartition is one partition of a moving tenant: its
// destination replicas and what the two leaders last reported.
type TenantMovePartition struct {
	TopicID   string `json:"topic_id"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Replicas  []int  `json:"replicas"`
	// Mirroring, Lag (offsets behind the source), Promoted and MirrorError
	// are the destination leader's; Lag is absent until it reported.
	Mirroring bool   `json:"mirroring"`
	Lag       *int64 `json:"lag,omitempty"`
	// MirrorBytesPerSec is the rate limit the destination leader's puller
	// applies (0: unlimited), as it last reported while mirroring.
	MirrorBytesPerSec *int64     `json:"mirror_bytes_per_sec,omitempty"`
	Promoted          bool       `json:"promoted"`
	MirrorError       string     `json:"mirror_error,omitempty"`
	MirrorAt          *time.Time `json:"mirror_at,omitempty"`
	// Fenced and FencedEnd are the source leader's.
	Fenced    bool       `json:"fenced"`
	FencedEnd *int64     `json:"fenced_end,omitempty"`
	FencedAt  *time.Time `json:"fenced_at,omitempty"`
}

// MoveTenantRequest moves a tenant to a cell of pool Pool
// (POST /v1/admin/tenants/{id}/move).
type MoveTenantRequest struct {
	Pool string `json:"pool"`
	// BytesPerSec bounds the copy from the source cell, over all the
	// tenant's partitions (TenantMove.BytesPerSec); 0 or absent is the
	// destination brokers' default for each partition.
	BytesPerSec int64 `json:"bytes_per_sec,omitempty"`
}

// UpdateTenantMoveRequest changes a tenant move that has not switched yet
// (PATCH /v1/admin/tenant-moves/{id}): BytesPerSec as in
// MoveTenantRequest, applied by the destination's pullers at once.
type UpdateTenantMoveRequest struct {
	BytesPerSec *int64 `json:"bytes_per_sec"`
}
