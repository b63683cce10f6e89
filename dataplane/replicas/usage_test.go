package replicas_test

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// TestUsagePlacement: one usage partition per broker, led by it by
// preference, and a broker added later changes no existing partition.
func TestUsagePlacement(t *testing.T) {
	brokers := func(ids ...int) []wire.Broker {
		var out []wire.Broker
		for _, id := range ids {
			out = append(out, wire.Broker{NodeID: id})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		brokers []wire.Broker
		want    map[int][]int
	}{
		{"too few brokers", brokers(1, 2), nil},
		{"three", brokers(3, 1, 2), map[int][]int{1: {1, 2, 3}, 2: {2, 1, 3}, 3: {3, 1, 2}}},
		{"a fourth added", brokers(1, 2, 3, 4), map[int][]int{1: {1, 2, 3}, 2: {2, 1, 3}, 3: {3, 1, 2}, 4: {4, 1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[int][]int{}
			for _, p := range replicas.UsagePlacement(viewOf(t, wire.CellState{StateVersion: 1, Brokers: tc.brokers}), 3) {
				got[p.Partition] = p.Replicas
			}
			if tc.want == nil {
				tc.want = map[int][]int{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("placement %v, want %v", got, tc.want)
			}
		})
	}
}
