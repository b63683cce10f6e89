package partition

import (
	"testing"

	"github.com/hashicorp/raft"
)

// Without Config.NodeID a server id is its node id in decimal; any other
// id (a name like "b0") maps to none, so Leader reports no node rather
// than a wrong one.
func TestDecimalNodeID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		node int
		ok   bool
	}{{"3", 3, true}, {"0", 0, true}, {"b0", 0, false}, {"-1", 0, false}, {"", 0, false}} {
		n, ok := decimalNodeID(raft.ServerID(tc.id))
		if ok != tc.ok || (ok && n != tc.node) {
			t.Fatalf("decimalNodeID(%q) = %d, %v; want %d, %v", tc.id, n, ok, tc.node, tc.ok)
		}
	}
}
