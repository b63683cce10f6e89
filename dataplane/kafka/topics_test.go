package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicAdmin: CreateTopics and DeleteTopics go through the control
// plane as the caller. Names are per tenant, so two tenants may both have
// "shared"; a viewer key may not create; a duplicate is
// TOPIC_ALREADY_EXISTS; a created topic is in Metadata when the answer
// arrives, and a deleted one is gone.
func TestTopicAdmin(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	a := b.cp.Signup("alpha", "developer")
	bt := b.cp.Signup("beta", "developer")
	v := b.cp.Signup("gamma", "viewer")
	for _, tn := range []*struct{ id, secret string }{{a.KeyID, a.Secret}, {bt.KeyID, bt.Secret}, {v.KeyID, v.Secret}} {
		b.waitForSecret(t, "keys", tn.id, tn.secret)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(cl *kgo.Client, name string, partitions int32) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis = 20_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
		rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
		r.Topics = []kmsg.CreateTopicsRequestTopic{rt}
		resp, err := cl.Request(ctx, r)
		if err != nil {
			t.Fatalf("create topics: %v", err)
		}
		return resp.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	ca, cb, cv := b.client(t, a), b.client(t, bt), b.client(t, v)

	if got := create(ca, "shared", 2); got.ErrorCode != 0 {
		t.Fatalf("alpha create: code %d %v", got.ErrorCode, got.ErrorMessage)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("shared")}}
	resp, err := ca.Broker(1).Request(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 2 {
		t.Fatalf("metadata right after create: code %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}
	if got := create(ca, "shared", 2); got.ErrorCode != 36 || got.ErrorMessage == nil {
		t.Fatalf("duplicate: code %d", got.ErrorCode)
	}
	if got := create(cb, "shared", 1); got.ErrorCode != 0 {
		t.Fatalf("beta's own \"shared\": code %d %v", got.ErrorCode, got.ErrorMessage)
	}
	if got := create(cv, "nope", 1); got.ErrorCode == 0 {
		t.Fatal("a viewer key created a topic")
	}
	// Kafka's -1 is the default partition count; 0 is refused, as Kafka does.
	if got := create(ca, "zero", 0); got.ErrorCode != 37 || got.ErrorMessage == nil {
		t.Fatalf("0 partitions: code %d, want INVALID_PARTITIONS (37)", got.ErrorCode)
	}
	if got := create(ca, "default", -1); got.ErrorCode != 0 || got.NumPartitions != 1 {
		t.Fatalf("-1 partitions: code %d, %d partitions, want the default of 1", got.ErrorCode, got.NumPartitions)
	}
	if err := ca.ProduceSync(ctx, &kgo.Record{Topic: "shared", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to the new topic: %v", err)
	}

	// CreatePartitions grows the topic through the control plane; partitions
	// only grow, and another tenant's topic is unknown.
	grow := func(cl *kgo.Client, name string, count int32) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.TimeoutMillis = 20_000
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: name, Count: count}}
		resp, err := cl.Request(ctx, r)
		if err != nil {
			t.Fatalf("create partitions: %v", err)
		}
		return resp.(*kmsg.CreatePartitionsResponse).Topics[0]
	}
	if got := grow(ca, "shared", 4); got.ErrorCode != 0 {
		t.Fatalf("grow to 4: code %d %v", got.ErrorCode, got.ErrorMessage)
	}
	if tp, ok := b.state.View().Topic(a.Tenant.ID, "shared"); !ok || len(tp.Partitions) != 4 {
		t.Fatal("grown topic not in the broker's state when the answer arrived")
	}
	if got := grow(ca, "shared", 2); got.ErrorCode != 37 || got.ErrorMessage == nil {
		t.Fatalf("shrink: code %d, want INVALID_PARTITIONS (37)", got.ErrorCode)
	}
	if got := grow(cb, "shared", 3); got.ErrorCode != 0 {
		t.Fatalf("beta grows its own shared: code %d %v", got.ErrorCode, got.ErrorMessage)
	}
	if got := grow(cb, "alpha-only", 3); got.ErrorCode != 3 {
		t.Fatalf("unknown topic: code %d, want UNKNOWN_TOPIC_OR_PARTITION (3)", got.ErrorCode)
	}
	if tp, _ := b.state.View().Topic(a.Tenant.ID, "shared"); len(tp.Partitions) != 4 {
		t.Fatal("beta's grow changed alpha's topic")
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 20_000
	del.TopicNames = []string{"shared"}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("shared")}}
	dresp, err := ca.Request(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if dt := dresp.(*kmsg.DeleteTopicsResponse).Topics[0]; dt.ErrorCode != 0 {
		t.Fatalf("delete: code %d %v", dt.ErrorCode, dt.ErrorMessage)
	}
	if _, ok := b.state.View().Topic(a.Tenant.ID, "shared"); ok {
		t.Fatal("deleted topic still in the broker's state when the answer arrived")
	}
	if _, ok := b.state.View().Topic(bt.Tenant.ID, "shared"); !ok {
		t.Fatal("deleting alpha's topic removed beta's")
	}
}
