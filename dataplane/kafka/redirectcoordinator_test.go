package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// TestRedirectFindCoordinator: a redirect session names, for each group,
// the home broker that is its offsets partition's preferred replica, in
// both the v4+ and the single-key shape; transaction coordinators and a
// home without usable brokers, or with too few, keep the retriable
// refusal.
func TestRedirectFindCoordinator(t *testing.T) {
	home := wire.KeyHome{Status: wire.KeyValid, TenantID: "ten_a", Cell: "cell-2", Brokers: []wire.HomeNode{
		{NodeID: 3, KafkaAddr: "10.0.0.3:9092"}, {NodeID: 1, KafkaAddr: "10.0.0.1:9092"},
		{NodeID: 2, KafkaAddr: "10.0.0.2:9092"}, {NodeID: 4, KafkaAddr: "10.0.0.4:9092"}}}
	const parts = 8
	want := func(group string) int32 {
		// The three lowest node ids, rotated by the group's partition,
		// under the session's own ids for the home's brokers.
		return RedirectNodeID([]int{1, 2, 3}[int(groups.Partition("ten_a", group, parts))%3])
	}
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.Version, r.CoordinatorKeys = 4, []string{"orders", "audit", "billing"}
	resp := redirectFindCoordinator(r, home, parts).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("got %d coordinators, want 3", len(resp.Coordinators))
	}
	seen := map[int32]bool{}
	for _, co := range resp.Coordinators {
		if co.ErrorCode != 0 || co.NodeID != want(co.Key) || co.Host != "10.0.0."+string(rune('0'+co.NodeID-redirectNodeBase)) || co.Port != 9092 {
			t.Errorf("group %s: %+v, want node %d", co.Key, co, want(co.Key))
		}
		seen[co.NodeID] = true
	}
	if seen[RedirectNodeID(4)] {
		t.Error("a broker outside the offsets replicas was named")
	}

	r3 := kmsg.NewPtrFindCoordinatorRequest()
	r3.Version, r3.CoordinatorKey = 3, "orders"
	resp = redirectFindCoordinator(r3, home, parts).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != 0 || resp.NodeID != want("orders") || resp.Port != 9092 || len(resp.Coordinators) != 0 {
		t.Errorf("v3: %+v", resp)
	}

	tx := kmsg.NewPtrFindCoordinatorRequest()
	tx.Version, tx.CoordinatorType, tx.CoordinatorKeys = 4, 1, []string{"txn"}
	if resp := redirectFindCoordinator(tx, home, parts).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != redirectFind {
		t.Errorf("transaction coordinator: %+v", resp.Coordinators[0])
	}
	bad := home
	bad.Brokers = []wire.HomeNode{{NodeID: 1, KafkaAddr: "no port"}, {NodeID: 2, KafkaAddr: "10.0.0.2"}, {NodeID: 3}}
	if resp := redirectFindCoordinator(r, bad, parts).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != redirectFind {
		t.Errorf("a home broker without a usable address: %+v", resp.Coordinators[0])
	}
	few := home
	few.Brokers = home.Brokers[:2]
	if resp := redirectFindCoordinator(r, few, parts).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != redirectFind {
		t.Errorf("a home of two brokers, too few for offsets partitions: %+v", resp.Coordinators[0])
	}
	if resp := redirectFindCoordinator(r, wire.KeyHome{TenantID: "ten_a"}, parts).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != redirectFind {
		t.Errorf("a home without brokers: %+v", resp.Coordinators[0])
	}
}
