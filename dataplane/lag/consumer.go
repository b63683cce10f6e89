package lag

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerTopics returns the names of the topics a group's members consume
// under Kafka's consumer protocol (protocol type "consumer"): the union of
// the topics in their subscriptions (each member's metadata for the
// group's protocol) and in their assignments, sorted. Other protocol types
// (Connect's, or a client's own) say nothing of topics in a form Sluice
// can read: nil. Metadata or an assignment that does not decode is
// skipped, as the coordinator passes on whatever bytes the client sent.
func ConsumerTopics(protocolType string, metadata, assignments [][]byte) []string {
	if protocolType != "consumer" {
		return nil
	}
	seen := map[string]bool{}
	for _, b := range metadata {
		if len(b) == 0 {
			continue
		}
		md := kmsg.NewConsumerMemberMetadata()
		if md.ReadFrom(b) != nil {
			continue
		}
		for _, t := range md.Topics {
			seen[t] = true
		}
	}
	for _, b := range assignments {
		if len(b) == 0 {
			continue
		}
		a := kmsg.NewConsumerMemberAssignment()
		if a.ReadFrom(b) != nil {
			continue
		}
		for _, t := range a.Topics {
			seen[t.Topic] = true
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		if t != "" {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
