package wire

import (
	"slices"
	"testing"
)

// TestOffsetsPlacement: the lowest node ids, rotated by partition, from
// nodes in any order; nothing while there are too few brokers.
func TestOffsetsPlacement(t *testing.T) {
	nodes := []int{7, 2, 9, 4}
	got := OffsetsPlacement(nodes, 4, 3)
	want := [][]int{{2, 4, 7}, {4, 7, 2}, {7, 2, 4}, {2, 4, 7}}
	if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Errorf("placement %v, want %v", got, want)
	}
	if !slices.Equal(nodes, []int{7, 2, 9, 4}) {
		t.Errorf("nodes changed to %v", nodes)
	}
	for _, c := range []struct {
		nodes               []int
		partitions, replica int
	}{{[]int{1, 2}, 8, 3}, {nil, 8, 3}, {[]int{1, 2, 3}, 0, 3}, {[]int{1, 2, 3}, 8, 0}} {
		if p := OffsetsPlacement(c.nodes, c.partitions, c.replica); p != nil {
			t.Errorf("OffsetsPlacement(%v, %d, %d) = %v, want none", c.nodes, c.partitions, c.replica, p)
		}
	}
	one := OffsetsPlacement([]int{5}, 2, 1)
	if !slices.EqualFunc(one, [][]int{{5}, {5}}, slices.Equal[[]int]) {
		t.Errorf("one replica: %v", one)
	}
}
