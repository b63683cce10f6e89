package wire

import "slices"

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
