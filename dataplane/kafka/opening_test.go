package kafka_test

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/kafka"
)

// looks counts the server's looks at a partition once armed (just before
// the test's produce is sent): the first look finds it not ready, every
// later one ready. A front door that answers on its first look refuses;
// one that waits and looks again succeeds, however slow the machine.
type looks struct {
	armed atomic.Bool
	n     atomic.Int32
}

// ready reports whether this look finds the partition ready.
func (l *looks) ready() bool { return !l.armed.Load() || l.n.Add(1) > 1 }

// notYet reports whether the partition has not been found ready yet.
func (l *looks) notYet() bool { return l.armed.Load() && l.n.Load() < 2 }

// opening hides every partition from the front door on its first look:
// a broker whose cell state already has a new topic but whose replica has
// not opened yet.
type opening struct {
	kafka.Partitions
	looks
}

func (o *opening) Get(topicID string, partition int32) (kafka.Partition, bool) {
	if !o.ready() {
		return nil, false
	}
	return o.Partitions.Get(topicID, partition)
}

// TestProduceWaitsForPartitionOpening: a produce for a partition the cell
// state places on this broker, arriving before its replica has opened
// here, waits for it and is appended, instead of NOT_LEADER_OR_FOLLOWER
// without a leader, after which franz-go waited out its 5 s metadata min
// age before a new topic's first record.
func TestProduceWaitsForPartitionOpening(t *testing.T) {
	parts := &opening{}
	p := firstProduceThrough(t, func(ps kafka.Partitions) kafka.Partitions { parts.Partitions = ps; return parts }, &parts.looks)
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce while the partition opens here: error %d, base offset %d; want 0, 0", p.ErrorCode, p.BaseOffset)
	}
}

// firstProduceThrough creates a topic of one partition, serves it through
// a listener whose partitions are wrap's, arms l, sends a produce of one
// record (v10, acks=all) and returns the answer.
func firstProduceThrough(t *testing.T, wrap func(kafka.Partitions) kafka.Partitions, l *looks) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("acme", "")
	b.createTopic(t, tn, "fresh", 1, nil)
	b.waitForKey(t, tn)
	addr := b.startServer(t, func(c *kafka.Config) { c.Partitions = wrap(b.store) })
	rc := dialRaw(t, addr)
	if r := rc.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 10, -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "fresh", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch("first")}}}}
	l.armed.Store(true)
	resp, err := rc.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// electing wraps every partition as one whose replica here has won its
// election and applies its predecessors' entries (ElectedHere) on the
// front door's first look at its leader, and serves from the next.
type electing struct {
	kafka.Partitions
	looks
}

func (e *electing) Get(topicID string, partition int32) (kafka.Partition, bool) {
	p, ok := e.Partitions.Get(topicID, partition)
	if !ok {
		return nil, false
	}
	return electedPart{Partition: p, e: e}, true
}

type electedPart struct {
	kafka.Partition
	e *electing
}

func (p electedPart) Leader() (int, bool) {
	if !p.e.ready() {
		return 0, false
	}
	return p.Partition.Leader()
}

func (p electedPart) ElectedHere() bool { return p.e.notYet() }

// TestProduceWaitsForElectedLeader: a produce reaching the replica that
// has just won its election, before it serves, waits the moment until it
// does: answered NOT_LEADER_OR_FOLLOWER naming itself, franz-go (1.22)
// did not retry it but waited for a metadata refresh, 5 s.
func TestProduceWaitsForElectedLeader(t *testing.T) {
	parts := &electing{}
	p := firstProduceThrough(t, func(ps kafka.Partitions) kafka.Partitions { parts.Partitions = ps; return parts }, &parts.looks)
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce to a leader about to serve: error %d, base offset %d; want 0, 0", p.ErrorCode, p.BaseOffset)
	}
}
