package main

import (
	"maps"
	"testing"
)

// TestAwaited: partitions settleCell gave up on are not waited for again,
// and leave the stuck set once they settle; any other unsettled partition
// is waited for.
func TestAwaited(t *testing.T) {
	stuck := map[string]string{"1 a 0": "x", "2 a 0": "x"}
	if awaited(map[string]string{"1 a 0": "x"}, stuck) {
		t.Fatal("waits for a partition it gave up on")
	}
	if want := map[string]string{"1 a 0": "x"}; !maps.Equal(stuck, want) {
		t.Fatalf("stuck %v after 2 a 0 settled, want %v", stuck, want)
	}
	if !awaited(map[string]string{"1 a 0": "x", "3 b 1": "y"}, stuck) {
		t.Fatal("does not wait for a partition it never gave up on")
	}
	if awaited(map[string]string{}, stuck) || len(stuck) != 0 {
		t.Fatalf("settled cell: awaited, or stuck %v left", stuck)
	}
	if awaited(map[string]string{}, nil) {
		t.Fatal("a settled cell with no stuck set is waited for")
	}
}
