package httpapi

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// An HTTP consumer is a member of a Kafka consumer group (protocol type
// "consumer", Kafka's range assignor), so Kafka clients and HTTP
// consumers can share a group. The coordinator broker keeps, per HTTP
// member, its assignment and each assigned partition's fetch position and
// retry state in memory (a memberSession); everything needed to rebuild
// it after a coordinator failover is durable: the assignment in the
// group's state, positions as committed offsets, retry state in the
// committed offsets' metadata.

// memberKey names an HTTP member on the coordinator.
type memberKey struct{ tenant, group, member string }

// memberOpts travel as the member's subscription UserData, so a
// coordinator that takes the group over knows them.
type memberOpts struct {
	AutoOffsetReset string `json:"auto_offset_reset"` // earliest or latest
}

// assignedPart is one partition assigned to a member.
type assignedPart struct {
	groups.TopicPartition
	topic string // the tenant's name for the topic
}

// memberSession is an HTTP member's state on the coordinator. mu
// serializes the member's requests (a member is one consumer).
type memberSession struct {
	mu         sync.Mutex
	generation int32
	// epoch is the coordinator's leader epoch the session was built in: a
	// session from an earlier epoch predates a coordinator move (its
	// positions may be behind or ahead of what was committed since) and
	// is rebuilt from the group's durable state.
	epoch int32
	opts  memberOpts
	parts []assignedPart
	next  int // where the next fetch starts among parts (fairness)
	// pos is each partition's next offset to deliver; absent until loaded
	// from the committed offset.
	pos map[groups.TopicPartition]int64
	// retry is each partition's nack state, absent when there is none.
	retry map[groups.TopicPartition]retryState
	// hw is each partition's high watermark as last read.
	hw map[groups.TopicPartition]int64
}

// retryState is a partition's pending retry: the nacked offset, how many
// deliveries failed, and when the next may start. It is committed as the
// offset's metadata.
type retryState struct {
	Offset   int64  `json:"offset"`
	Attempts int    `json:"attempts"`
	NextMs   int64  `json:"next_ms"`
	Error    string `json:"error,omitempty"`
	// DLQFrom, set once the message is being dead-lettered, is the
	// dead-letter topic's high watermark before its dead letter was
	// published: a repeated dead-lettering looks for it from there.
	DLQFrom *int64 `json:"dlq_from,omitempty"`
}

// retryMetadataPrefix marks committed-offset metadata written by the HTTP
// API's nack.
const retryMetadataPrefix = "sluice-retry:"

func (r retryState) metadata() string {
	b, _ := json.Marshal(r)
	return retryMetadataPrefix + string(b)
}

func parseRetry(md string) (retryState, bool) {
	if len(md) <= len(retryMetadataPrefix) || md[:len(retryMetadataPrefix)] != retryMetadataPrefix {
		return retryState{}, false
	}
	var r retryState
	if json.Unmarshal([]byte(md[len(retryMetadataPrefix):]), &r) != nil || r.Offset < 0 || r.Attempts < 1 {
		return retryState{}, false
	}
	return r, true
}

func (r retryState) next() time.Time { return time.UnixMilli(r.NextMs) }

// sessions are the HTTP members this broker coordinates.
type sessions struct {
	// mu guards m; each session has its own lock.
	mu sync.Mutex
	m  map[memberKey]*memberSession
}

func (ss *sessions) get(k memberKey) *memberSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[k]
}

func (ss *sessions) put(k memberKey, s *memberSession) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[memberKey]*memberSession{}
	}
	ss.m[k] = s
}

func (ss *sessions) drop(k memberKey) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, k)
}

// keep drops the group's sessions whose member is not in live.
func (ss *sessions) keep(tenant, group string, live map[string]bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k := range ss.m {
		if k.tenant == tenant && k.group == group && !live[k.member] {
			delete(ss.m, k)
		}
	}
}

// subscription encodes a member's topics as Kafka's consumer protocol
// metadata.
func subscription(topics []string, o memberOpts) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	m.UserData, _ = json.Marshal(o)
	return m.AppendTo(nil)
}

// decodeSubscription reads a member's subscription; Kafka clients'
// UserData is not ours and is ignored.
func decodeSubscription(b []byte) ([]string, memberOpts) {
	m := kmsg.NewConsumerMemberMetadata()
	if err := m.ReadFrom(b); err != nil {
		return nil, memberOpts{}
	}
	var o memberOpts
	_ = json.Unmarshal(m.UserData, &o)
	return m.Topics, o
}

// rangeAssign is Kafka's range assignor: per topic, the subscribed
// members in member id order get consecutive ranges of partitions, the
// first ones one more when they do not divide evenly. counts gives each
// topic's partition count (topics not in it are skipped). It returns the
// encoded consumer-protocol assignment of every member.
func rangeAssign(members []groups.Member, counts map[string]int) map[string][]byte {
	subs := map[string][]string{} // topic → member ids
	for _, m := range members {
		topics, _ := decodeSubscription(m.Metadata)
		for _, t := range topics {
			subs[t] = append(subs[t], m.MemberID)
		}
	}
	plan := map[string]map[string][]int32{} // member → topic → partitions
	for t, ms := range subs {
		n, ok := counts[t]
		if !ok {
			continue
		}
		sort.Strings(ms)
		per, extra := n/len(ms), n%len(ms)
		for i, id := range ms {
			start := per*i + min(i, extra)
			size := per
			if i < extra {
				size++
			}
			for p := start; p < start+size; p++ {
				if plan[id] == nil {
					plan[id] = map[string][]int32{}
				}
				plan[id][t] = append(plan[id][t], int32(p))
			}
		}
	}
	out := map[string][]byte{}
	for _, m := range members {
		a := kmsg.NewConsumerMemberAssignment()
		var topics []string
		for t := range plan[m.MemberID] {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, plan[m.MemberID][t]
			a.Topics = append(a.Topics, at)
		}
		out[m.MemberID] = a.AppendTo(nil)
	}
	return out
}

// decodeAssignment turns an encoded assignment into the member's
// partitions, by topic id in v; topics the tenant no longer has are left
// out.
func decodeAssignment(b []byte, v *cellview.View, tenant string) []assignedPart {
	a := kmsg.NewConsumerMemberAssignment()
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return nil
	}
	var out []assignedPart
	for _, at := range a.Topics {
		t, ok := v.Topic(tenant, at.Topic)
		if !ok {
			continue
		}
		for _, p := range at.Partitions {
			if int(p) < len(t.Partitions) {
				out = append(out, assignedPart{TopicPartition: groups.TopicPartition{TopicID: t.ID, Partition: p}, topic: t.Name})
			}
		}
	}
	return out
}
