package partition

import (
	"testing"
	"time"
)

// TestFollowerInSyncRule: another broker's voter is in sync while its
// broker answers and, seen from its leader, it has not gone longer than
// Kafka's replica.lag.time.max.ms (30 s) without the leader's whole log;
// a broker that does not lead cannot see that lag and judges by liveness
// alone.
func TestFollowerInSyncRule(t *testing.T) {
	for _, tc := range []struct {
		name        string
		down, leads bool
		outOfSync   time.Duration
		want        bool
	}{
		{"caught up", false, true, 0, true},
		{"29 s out of sync", false, true, 29 * time.Second, true},
		{"at the limit", false, true, ReplicaLagMax, true},
		{"31 s out of sync", false, true, 31 * time.Second, false},
		{"its broker down", true, true, 0, false},
		{"seen from a follower, answering", false, false, time.Hour, true},
		{"seen from a follower, down", true, false, 0, false},
	} {
		if got := followerInSync(tc.down, tc.leads, tc.outOfSync); got != tc.want {
			t.Errorf("%s: in sync %v, want %v", tc.name, got, tc.want)
		}
	}
}
