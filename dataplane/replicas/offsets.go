package replicas

import (
	"slices"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// DefaultOffsetsReplicas is the default replica count of an offsets
// partition.
const DefaultOffsetsReplicas = wire.DefaultOffsetsReplicas

// OffsetsPlacement places the cell's internal offsets partitions (topic
// id groups.OffsetsTopicID), which hold the consumer groups' state and
// committed offsets: n partitions over the view's brokers by the rule of
// wire.OffsetsPlacement (the replicas lowest node ids, rotated by
// partition so that preferred leaders, and so coordinators, spread).
// Every broker computes the same placement from the same state.
//
// It is nil until the state lists that many brokers: a Raft group
// bootstrapped with fewer voters could never be grown safely (replica
// changes of a live partition are not supported), and the brokers of a new
// cell appear in its state one at a time. Later brokers (higher node ids)
// do not change the placement; removing one of the chosen brokers from the
// cell would, and is not supported.
func OffsetsPlacement(v *cellview.View, n, replicas int) []wire.Partition {
	nodes := make([]int, 0, len(v.Brokers))
	for _, b := range v.Brokers {
		nodes = append(nodes, b.NodeID)
	}
	placed := wire.OffsetsPlacement(nodes, n, replicas)
	if placed == nil {
		return nil
	}
	out := make([]wire.Partition, len(placed))
	for p, r := range placed {
		out[p] = wire.Partition{Partition: p, Replicas: r}
	}
	return out
}

// offsetsPlaced is the cell's offsets partitions: the cell state's
// Offsets when the control plane has taken their placement over (to move
// them), else OffsetsPlacement's; none on a broker configured without
// them (OffsetsPartitions negative).
func (m *Manager) offsetsPlaced(v *cellview.View) []wire.Partition {
	if m.cfg.OffsetsPartitions < 0 {
		return nil
	}
	if len(v.Offsets) > 0 {
		return v.Offsets
	}
	return OffsetsPlacement(v, m.cfg.OffsetsPartitions, m.cfg.OffsetsReplicas)
}

// OffsetsReplicas is the replicas of offsets partition p in the cell
// state last applied, the preferred leader first; nil while that state
// places none (groups.Config.Placement).
func (m *Manager) OffsetsReplicas(p int32) []int {
	placed := m.offsetsAt.Load()
	if placed == nil {
		return nil
	}
	for _, wp := range *placed {
		if wp.Partition == int(p) {
			return slices.Clone(wp.Replicas)
		}
	}
	return nil
}

// offsetsWanted adds this broker's offsets partitions to want, and keeps
// their placement for OffsetsReplicas.
func (m *Manager) offsetsWanted(v *cellview.View, want map[key]wire.Partition) {
	placed := m.offsetsPlaced(v)
	m.offsetsAt.Store(&placed)
	for _, p := range placed {
		for _, r := range p.Replicas {
			if r == m.cfg.NodeID {
				want[key{groups.OffsetsTopicID, int32(p.Partition)}] = p
			}
		}
	}
}
