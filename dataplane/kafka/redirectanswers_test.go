package kafka

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// redirectRequests are requests a redirect session may get, each naming
// one topic and partition, group or resource.
func redirectRequests() []kmsg.Request {
	topic, group := "orders", "g"
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1}}}}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1}}}}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 1}}}}
	ofle := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofle.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 1}}}}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: -1}}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 1, Offset: 5}}}}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{topic}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &topic}}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: topic, Count: 3}}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic}}
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic}}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: topic}}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = group
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group = group
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = group
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Group = group
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = group
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1}}}}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{1}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{group}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = group
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = []kmsg.CreateACLsRequestCreation{kmsg.NewCreateACLsRequestCreation()}
	da := kmsg.NewPtrDeleteACLsRequest()
	da.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	as.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "SLKAAAAAAAAAAAAAAAA", Mechanism: 1}}
	return []kmsg.Request{produce, fetch, lo, dr, ofle, ct, dt, cp, dc, kmsg.NewPtrDescribeACLsRequest(), ca, da, fc, kmsg.NewPtrListGroupsRequest(), jg, sg, hb, lg, oc, of, dg, del, od,
		kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), as, ac, iac}
}

// Every request a redirect session answers, at every version, carries
// only retriable errors that send the client elsewhere, at least one, and
// encodes.
func TestRedirectAnswersAreRetriable(t *testing.T) {
	covered := map[int16]bool{}
	for _, req := range redirectRequests() {
		covered[req.Key()] = true
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			resp := redirectAnswer(req)
			if resp == nil {
				t.Fatalf("%s v%d: no redirect answer", kmsg.NameForKey(req.Key()), v)
			}
			if resp.GetVersion() != v || resp.Key() != req.Key() {
				t.Fatalf("%s v%d: answered %s v%d", kmsg.NameForKey(req.Key()), v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			// What the client reads: encoded at this version, decoded.
			wire := req.ResponseKind()
			if err := wire.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
			}
			errs := 0
			for _, c := range errorCodes(t, wire) {
				if c == 0 {
					continue // an error field of a part the client did not ask about
				}
				errs++
				if err := kerr.ErrorForCode(c); !kerr.IsRetriable(err) {
					t.Fatalf("%s v%d: code %d (%v) is not retriable", kmsg.NameForKey(req.Key()), v, c, err)
				}
			}
			if errs == 0 {
				t.Fatalf("%s v%d: no error reaches the client", kmsg.NameForKey(req.Key()), v)
			}
		}
	}
	// Everything the listener serves is either answered as on any
	// connection or has a redirect answer.
	for key := range apis {
		switch key {
		case 3, 17, 18, 22, 36: // Metadata, SASL, ApiVersions, InitProducerId
			continue
		}
		if !covered[key] {
			t.Errorf("%s is served but has no redirect answer", kmsg.NameForKey(key))
		}
	}
	if redirectAnswer(kmsg.NewPtrAlterReplicaLogDirsRequest()) != nil {
		t.Error("an unknown request got a redirect answer instead of a closed connection")
	}
}

// errorCodes collects every ErrorCode field of a response.
func errorCodes(t *testing.T, resp kmsg.Response) []int16 {
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var out []int16
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if n, ok := e.(float64); ok && k == "ErrorCode" {
					out = append(out, int16(n))
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}
