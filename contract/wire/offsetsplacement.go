package wire

import "slices"

// The cell's consumer-group offsets partitions, as brokers run them and
// the control plane and redirect sessions assume every cell runs them.
const (
	// OffsetsTopicID is the topic id brokers give the offsets partitions
	// (moves of them name it).
	OffsetsTopicID = "__offsets"
	// DefaultOffsetsPartitions is the brokers' default offsets partition
	// count.
	DefaultOffsetsPartitions = 8
	// DefaultOffsetsReplicas is the brokers' default replica count of an
	// offsets partition.
	DefaultOffsetsReplicas = 3
)

// OffsetsPlacement is the placement every broker gives its cell's
// consumer-group offsets partitions until the control plane takes it
// over (CellState.Offsets), and which the control plane and a redirect
// session's coordinator lookup assume: partitions partitions, each over
// the replicas brokers with the lowest node ids, rotated by partition so
// that preferred leaders (the first replica, and so the groups'
// coordinators) spread. It is nil while nodes holds fewer than replicas
// brokers. nodes is not modified.
func OffsetsPlacement(nodes []int, partitions, replicas int) [][]int {
	if partitions <= 0 || replicas <= 0 || len(nodes) < replicas {
		return nil
	}
	lowest := slices.Sorted(slices.Values(nodes))[:replicas]
	out := make([][]int, partitions)
	for p := range out {
		out[p] = make([]int, 0, replicas)
		for i := range replicas {
			out[p] = append(out[p], lowest[(p+i)%replicas])
		}
	}
	return out
}
