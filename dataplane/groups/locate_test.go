package groups_test

import (
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// TestLocateWithoutReplica: a broker without a replica of a group's
// offsets partition names the partition's preferred leader when the cell
// places it on other brokers only, and answers "not ready" while the
// partition is not placed or its own replica is still opening.
func TestLocateWithoutReplica(t *testing.T) {
	const parts = 4
	cases := []struct {
		name   string
		self   int
		placed func(p int32) []int
		named  bool // false: not ready
	}{
		{"placed elsewhere", 4, func(p int32) []int { return []int{int(p)%3 + 1, 5, 6} }, true},
		{"not placed yet", 4, func(int32) []int { return nil }, false},
		{"own replica opening", 2, func(int32) []int { return []int{1, 2, 3} }, false},
		{"no placement known", 4, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			co, err := groups.New(groups.Config{NodeID: tc.self, Partitions: parts,
				Offsets:   func(int32) (groups.Log, bool) { return nil, false },
				Placement: tc.placed})
			if err != nil {
				t.Fatal(err)
			}
			defer co.Close()
			for _, g := range []string{"a", "b", "c", "d", "e", "f"} {
				node, local, err := co.Locate("tn_1", g)
				if !tc.named {
					if !catalog.Has(err, catalog.CoordinatorNotReady) || local || node != -1 {
						t.Errorf("group %s: %d, %v, %v; want -1 and coordinator not ready", g, node, local, err)
					}
					continue
				}
				want := int(groups.Partition("tn_1", g, parts))%3 + 1
				if err != nil || local || node != want {
					t.Errorf("group %s: %d, %v, %v; want the preferred leader %d, not local", g, node, local, err, want)
				}
			}
		})
	}
}
