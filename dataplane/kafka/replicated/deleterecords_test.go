package replicated

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// deleteTo asks kadm to delete the records of topic's partition 0 below
// offset and returns the partition's answer.
func deleteTo(t *testing.T, adm *kadm.Client, topic string, offset int64) kadm.DeleteRecordsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset})
	rs, err := adm.DeleteRecords(ctx, o)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	r, ok := rs.Lookup(topic, 0)
	if !ok {
		t.Fatalf("no answer for %s/0 in %v", topic, rs)
	}
	return r
}

// TestDeleteRecordsAndOffsetOutOfRange: kadm.DeleteRecords moves the log
// start of a replicated partition forward on every replica; ListOffsets
// and Fetch report it; a consumer positioned below it gets
// OFFSET_OUT_OF_RANGE and recovers with its reset-to-earliest policy at
// the new log start. An offset above the high watermark is
// OFFSET_OUT_OF_RANGE and changes nothing; a key without delete on the
// topic is refused; another tenant does not see the topic at all.
func TestDeleteRecordsAndOffsetOutOfRange(t *testing.T) {
	c := startLifecycleCell(t, nil)
	tn := c.cp.Signup("acme", "admin")
	topicID := c.createTopic(tn, "events", 1, nil)
	ctx := context.Background()
	prod := c.client(tn, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 20 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(c.client(tn))

	// Above the high watermark: refused, nothing changes.
	if r := deleteTo(t, adm, "events", 1000); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete beyond the high watermark: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	if s := c.leader(topicID, 0).LogStartOffset(); s != 0 {
		t.Fatalf("log start %d after a refused delete", s)
	}

	if r := deleteTo(t, adm, "events", 12); r.Err != nil || r.LowWatermark != 12 {
		t.Fatalf("delete records to 12: %+v", r)
	}
	celltest.WaitFor(t, 10*time.Second, "log start 12 on every replica", func() bool {
		for b := range c.mgrs {
			if c.replica(b, topicID, 0).LogStartOffset() != 12 {
				return false
			}
		}
		return true
	})
	// An offset at or below the log start changes nothing.
	if r := deleteTo(t, adm, "events", 5); r.Err != nil || r.LowWatermark != 12 {
		t.Fatalf("delete records to 5 after 12: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := starts.Lookup("events", 0); !ok || o.Err != nil || o.Offset != 12 {
		t.Fatalf("ListOffsets earliest: %+v", o)
	}

	// A consumer positioned at 3 (a committed position below the log
	// start) is out of range, resets to the earliest offset (12) and
	// reads on from there.
	cons := c.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().At(3)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	fs := cons.PollRecords(fctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 12 || string(recs[0].Value) != "12" {
		t.Fatalf("consumer after the reset read %d records (first at %d), want offset 12 first", len(recs), firstOffset(recs))
	}

	// A raw fetch below the log start is OFFSET_OUT_OF_RANGE and says
	// where the log starts.
	raw := c.client(tn)
	freq := newFetch("events", 0, 2)
	node, _ := c.leader(topicID, 0).Leader()
	kr, err := raw.Broker(node).Request(ctx, freq)
	if err != nil {
		t.Fatal(err)
	}
	fresp := kr.(*kmsg.FetchResponse)
	fp := fresp.Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.LogStartOffset != 12 || fp.HighWatermark != 20 {
		t.Fatalf("fetch at 2: error %d, log start %d, high watermark %d", fp.ErrorCode, fp.LogStartOffset, fp.HighWatermark)
	}

	// A viewer key may read but not delete.
	key, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	viewer := &cptest.Tenant{SignupResponse: tn.SignupResponse, KeyID: key.ID, Secret: key.Secret}
	celltest.WaitFor(t, 10*time.Second, "the viewer key on every broker", func() bool {
		for _, st := range c.syncers {
			if !st.View().HasKey(key.ID) {
				return false
			}
		}
		return true
	})
	if r := deleteTo(t, kadm.NewClient(c.client(viewer)), "events", 15); !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("viewer delete records: %+v, want TOPIC_AUTHORIZATION_FAILED", r)
	}
	// Another tenant: the topic does not exist for it.
	other := c.cp.Signup("globex", "admin")
	celltest.WaitFor(t, 10*time.Second, "the other tenant's key on every broker", func() bool {
		for _, st := range c.syncers {
			if !st.View().HasKey(other.KeyID) {
				return false
			}
		}
		return true
	})
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: "events", Partition: 0, At: 15})
	rs, err := kadm.NewClient(c.client(other)).DeleteRecords(ctx, o)
	if r, ok := rs.Lookup("events", 0); ok && r.Err != nil {
		err = r.Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("other tenant's delete records: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// Sent to the leader anyway, the request finds no such topic.
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "events"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = 15
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err = c.client(other).Broker(node).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := kr.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("other tenant's delete records at the leader: error %d", code)
	}
	if s := c.leader(topicID, 0).LogStartOffset(); s != 12 {
		t.Fatalf("log start %d after refused deletes, want 12", s)
	}
}

// newFetch is a Fetch request for one partition of topic at offset.
func newFetch(topic string, part int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	req.ReplicaID = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = part
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func firstOffset(recs []*kgo.Record) int64 {
	if len(recs) == 0 {
		return -1
	}
	return recs[0].Offset
}
