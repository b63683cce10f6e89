package kafka_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTenantIsolation: tenant B's key cannot list, produce to, fetch from,
// list offsets of or describe tenant A's topic, and every answer is exactly
// the answer for a topic that does not exist, so B cannot even learn the
// name is taken.
func TestTenantIsolation(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	bt := b.cp.Signup("beta", "admin")
	b.createTopic(t, a, "secret", 2, nil)
	b.createTopic(t, bt, "mine", 1, nil)
	b.waitForKey(t, a)
	b.waitForKey(t, bt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Tenant A has data in its topic.
	ca := b.client(t, a, kgo.DefaultProduceTopic("secret"))
	if err := ca.ProduceSync(ctx, &kgo.Record{Value: []byte("alpha's data")}).FirstErr(); err != nil {
		t.Fatalf("alpha produce: %v", err)
	}

	cb := b.client(t, bt)
	br := cb.Broker(1)
	ask := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := br.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}

	// Listing all topics shows only B's.
	all := ask(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(all.Topics) != 1 || *all.Topics[0].Topic != "mine" {
		t.Fatalf("beta lists %+v", all.Topics)
	}

	cases := []struct {
		name string
		req  func(topic string) kmsg.Request
		// blank removes the topic name from a response, so that the
		// answers for two names can be compared.
		blank func(kmsg.Response)
		code  func(kmsg.Response) int16
	}{
		{"metadata", func(topic string) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
			return r
		}, func(r kmsg.Response) { r.(*kmsg.MetadataResponse).Topics[0].Topic = nil },
			func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode }},
		{"produce", func(topic string) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 5000
			r.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch("intruder")}}}}
			return r
		}, func(r kmsg.Response) { r.(*kmsg.ProduceResponse).Topics[0].Topic = "" },
			func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }},
		{"fetch", func(topic string) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 10, 1<<20, -1
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			r.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) { r.(*kmsg.FetchResponse).Topics[0].Topic = "" },
			func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }},
		{"list offsets", func(topic string) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp = -2
			r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{p}}}
			return r
		}, func(r kmsg.Response) { r.(*kmsg.ListOffsetsResponse).Topics[0].Topic = "" },
			func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }},
		{"describe configs", func(topic string) kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic}}
			return r
		}, func(r kmsg.Response) { r.(*kmsg.DescribeConfigsResponse).Resources[0].ResourceName = "" },
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := ask(tc.req("secret"))
			missing := ask(tc.req("no-such-topic"))
			if code := tc.code(other); code != 3 {
				t.Fatalf("error code for another tenant's topic: %d, want 3 (UNKNOWN_TOPIC_OR_PARTITION)", code)
			}
			tc.blank(other)
			tc.blank(missing)
			if !reflect.DeepEqual(other, missing) {
				t.Fatalf("another tenant's topic answers\n%+v\na missing topic answers\n%+v", other, missing)
			}
		})
	}

	// Alpha's data is untouched by beta's attempts.
	lo := kmsg.NewPtrListOffsetsRequest()
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp = -1
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "secret", Partitions: []kmsg.ListOffsetsRequestTopicPartition{p, {Partition: 1, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
	resp, err := ca.Broker(1).Request(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, lp := range resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions {
		if lp.ErrorCode != 0 {
			t.Fatalf("alpha list offsets: code %d", lp.ErrorCode)
		}
		end += lp.Offset
	}
	if end != 1 {
		t.Fatalf("alpha's topic holds %d records, want 1", end)
	}
}
