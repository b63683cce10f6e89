package api

import (
	"slices"
	"time"
)

// Move is one partition's replica move (/v1/admin/moves): from Original
// to Target, by broker node id, the first of each the preferred leader.
// State is running, completed, cancelling (rolling back to Original),
// cancelled or failed. While unfinished, Replicas, Adding and Removing are
// what the cell state publishes for the partition.
type Move struct {
	ID        int64  `json:"id"`
	CellID    string `json:"cell_id"`
	TenantID  string `json:"tenant_id"`
	TopicID   string `json:"topic_id"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Original  []int  `json:"original"`
	Target    []int  `json:"target"`
	State     string `json:"state"`
	// Reason is what made the move ("drain of broker B"); empty for a
	// move asked for by itself.
	Reason string `json:"reason"`
	// Failure is why the move failed (state failed): what keeps it from
	// its target. A failed move still completes if the cause clears;
	// cancel it to roll it back.
	Failure  string `json:"failure,omitempty"`
	Replicas []int  `json:"replicas,omitempty"`
	Adding   []int  `json:"adding,omitempty"`
	Removing []int  `json:"removing,omitempty"`
	// Voters, Nonvoters and Joining are the partition leader's last report
	// of its Raft configuration and of each joining replica's distance.
	Voters    []int         `json:"voters,omitempty"`
	Nonvoters []int         `json:"nonvoters,omitempty"`
	Joining   []MoveJoining `json:"joining"`
	// BytesRemaining is the joining replicas' bytes behind the leader,
	// summed; BytesPerSec its fall per second between the leader's last
	// two reports that lowered it; ETASeconds BytesRemaining over it,
	// absent while no rate is known.
	BytesRemaining int64      `json:"bytes_remaining"`
	BytesPerSec    float64    `json:"bytes_per_sec"`
	ETASeconds     *float64   `json:"eta_seconds,omitempty"`
	ProgressAt     *time.Time `json:"progress_at,omitempty"`
	CreatedBy      string     `json:"created_by"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// MoveJoining is how far one joining replica is behind the leader.
type MoveJoining struct {
	Node          int    `json:"node"`
	BytesBehind   int64  `json:"bytes_behind"`
	EntriesBehind uint64 `json:"entries_behind"`
}

// CreateMoveRequest moves a partition of a topic (by topic id) to
// Replicas: as many broker node ids as the partition has replicas, each an
// active broker of the partition's cell, the first the preferred leader.
// Topic id "__offsets" names one of cell CellID's consumer-group offsets
// partitions; for a topic, CellID may be left out (else it must be the
// topic's cell).
type CreateMoveRequest struct {
	CellID    string `json:"cell_id,omitempty"`
	TopicID   string `json:"topic_id"`
	Partition int    `json:"partition"`
	Replicas  []int  `json:"replicas"`
}

// Drain is a broker set draining and the moves that take every replica
// off it (POST /v1/admin/brokers/{id}/drain).
type Drain struct {
	Broker Broker `json:"broker"`
	Moves  []Move `json:"moves"`
}

// Ends is the nodes an unfinished move puts a replica on and the nodes it
// takes one off, towards its goal: the target while running, the original
// replicas while cancelling.
func (m Move) Ends() (onto, off []int) {
	from, goal := m.Original, m.Target
	if m.State == "cancelling" {
		from, goal = m.Target, m.Original
	}
	return NodesMinus(goal, from), NodesMinus(from, goal)
}

// NodesMinus is a's node ids that are not in b, in a's order.
func NodesMinus(a, b []int) []int {
	var out []int
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}
