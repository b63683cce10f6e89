package frontdoor_test

import (
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// quorumPart is a local replica that reports whether its majority is gone
// (dataplane/partition's Replica.NoQuorum); nothing else of it is called.
type quorumPart struct {
	frontdoor.Partition
	gone bool
}

func (p quorumPart) NoQuorum() bool { return p.gone }

// TestNoLeader: a partition without a leader here is not_enough_replicas
// only when its replica finds its majority gone; otherwise, and without a
// local replica, not_leader with the caller's message.
func TestNoLeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    frontdoor.Partition
		want *catalog.Entry
	}{
		{"no local replica", nil, catalog.NotLeader},
		{"majority there", quorumPart{gone: false}, catalog.NotLeader},
		{"majority gone", quorumPart{gone: true}, catalog.NotEnoughReplicas},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := frontdoor.NoLeader(tc.p, "retry")
			if ce.Entry != tc.want || !ce.Entry.Retriable {
				t.Fatalf("NoLeader = %s (retriable %v), want retriable %s", ce.Entry.Code, ce.Entry.Retriable, tc.want.Code)
			}
			if tc.want == catalog.NotLeader && ce.Message != "retry" {
				t.Fatalf("not_leader message %q, want the caller's", ce.Message)
			}
		})
	}
}
