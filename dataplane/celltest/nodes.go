package celltest

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// NodeOf maps a cell broker's server id ("b0") to its node id (1).
func NodeOf(id raft.ServerID) (int, bool) {
	var b int
	if _, err := fmt.Sscanf(string(id), "b%d", &b); err != nil {
		return -1, false
	}
	return b + 1, true
}
