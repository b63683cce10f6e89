package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// TestMetadataWaitsForTopicBeingCreated: a Metadata request that names a
// topic the broker's cell state does not hold yet waits for the state to
// bring it, so a client that asks right after creating a topic through
// the control plane gets its partitions on the first try; a topic that
// never comes is still UNKNOWN_TOPIC_OR_PARTITION once the wait is over.
func TestMetadataWaitsForTopicBeingCreated(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.waitForSecret(t, "keys", a.KeyID, a.Secret)
	// A wait far longer than the state takes to arrive, so that the
	// answer cannot race the create on a slow machine.
	addr := b.startServer(t, func(c *kafka.Config) { c.UnknownTopicWait = time.Minute })
	rc := dialRaw(t, addr)
	if r := rc.authenticate(a.KeyID, a.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", r.ErrorCode)
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fresh")}}
	rc.send(md)
	if _, ok := b.state.View().Topic(a.Tenant.ID, "fresh"); ok {
		t.Fatal("the topic is in the broker's state before it was created")
	}
	if _, err := a.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: "fresh", Partitions: 3}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	got, err := rc.receive(md)
	if err != nil {
		t.Fatalf("metadata answer: %v", err)
	}
	resp := got.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("metadata asked before the create: %+v, want the topic with 3 partitions", resp.Topics)
	}

	// A topic that never comes: UNKNOWN_TOPIC_OR_PARTITION after the
	// default wait, on the broker's own listener.
	rd := dialRaw(t, b.addr)
	if r := rd.authenticate(a.KeyID, a.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", r.ErrorCode)
	}
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("never")}}
	got, err = rd.roundTrip(md)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if mt := got.(*kmsg.MetadataResponse).Topics; len(mt) != 1 || mt[0].ErrorCode != 3 {
		t.Fatalf("metadata of a topic that does not exist: %+v, want code 3", mt)
	}
}
