package lag

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func subscription(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 1, topics
	return m.AppendTo(nil)
}

func assignment(topics ...string) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, t := range topics {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t, []int32{0}
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

func TestConsumerTopics(t *testing.T) {
	cases := []struct {
		name                  string
		protocolType          string
		metadata, assignments [][]byte
		want                  []string
	}{
		{"subscriptions and assignments", "consumer", [][]byte{subscription("orders", "audit"), subscription("orders")},
			[][]byte{assignment("orders"), assignment("legacy")}, []string{"audit", "legacy", "orders"}},
		{"not yet assigned", "consumer", [][]byte{subscription("orders")}, [][]byte{nil}, []string{"orders"}},
		{"undecodable bytes are skipped", "consumer", [][]byte{{0, 1, 2}, subscription("orders")}, [][]byte{{9}},
			[]string{"orders"}},
		{"another protocol type", "connect", [][]byte{subscription("orders")}, nil, nil},
		{"no members", "consumer", nil, nil, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConsumerTopics(tc.protocolType, tc.metadata, tc.assignments); !slices.Equal(got, tc.want) {
				t.Fatalf("ConsumerTopics = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzConsumerTopics feeds client-supplied member metadata and
// assignments. Invariants: no panic; the names are sorted, unique and
// non-empty.
func FuzzConsumerTopics(f *testing.F) {
	f.Add(subscription("orders", "audit"), assignment("orders"))
	f.Add([]byte{0, 1, 0, 0, 0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, md, asg []byte) {
		got := ConsumerTopics("consumer", [][]byte{md}, [][]byte{asg})
		for i, n := range got {
			if n == "" || (i > 0 && got[i-1] >= n) {
				t.Fatalf("names %q not sorted, unique and non-empty", got)
			}
		}
	})
}
