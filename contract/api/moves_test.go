package api

import (
	"slices"
	"testing"
)

// A move's ends are the brokers it puts a replica on and takes one off,
// towards its goal: reversed while it is cancelling.
func TestMoveEnds(t *testing.T) {
	run := Move{State: "running", Original: []int{1, 2, 3}, Target: []int{2, 3, 4}}
	if onto, off := run.Ends(); !slices.Equal(onto, []int{4}) || !slices.Equal(off, []int{1}) {
		t.Fatalf("running move ends: onto %v off %v", onto, off)
	}
	run.State = "cancelling"
	if onto, off := run.Ends(); !slices.Equal(onto, []int{1}) || !slices.Equal(off, []int{4}) {
		t.Fatalf("cancelling move ends: onto %v off %v", onto, off)
	}
	if got := NodesMinus([]int{3, 1, 2}, []int{1}); !slices.Equal(got, []int{3, 2}) {
		t.Fatalf("NodesMinus keeps a's order: %v", got)
	}
}
