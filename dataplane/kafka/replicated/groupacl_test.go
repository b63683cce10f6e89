package replicated

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestGroupACLs: a client key needs group read to join or commit, topic
// read to commit a topic's offsets, and group delete to delete.
func TestGroupACLs(t *testing.T) {
	c, tn := startGroupCell(t, 1, "events", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := tn.Key.CreateTopic(ctx, api.CreateTopicRequest{Name: "hidden", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "consumer", Role: authz.RoleClient})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []api.CreateACLRequest{
		{Principal: k.ID, ResourceType: authz.ResourceTopic, ResourceName: "events", Operation: authz.OpRead},
		{Principal: k.ID, ResourceType: authz.ResourceGroup, ResourceName: "allowed", Operation: authz.OpRead},
	} {
		if _, err := tn.Key.CreateACL(ctx, a); err != nil {
			t.Fatalf("create acl: %v", err)
		}
	}
	celltest.WaitFor(t, 20*time.Second, "key, ACLs and topic on every broker", func() bool {
		for _, st := range c.states {
			v := st.View()
			if _, ok := v.Topic(tn.Tenant.ID, "hidden"); !ok || len(v.ACLs) < 2 {
				return false
			}
			if _, err := v.Authenticate(k.ID, k.Secret, time.Now()); err != nil {
				return false
			}
		}
		return true
	})
	c.waitCoordinators()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.SASL(plain.Auth{User: k.ID, Pass: k.Secret}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	commit := func(group, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return codeOf(t, err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// direct sends req to one broker of the cell, past FindCoordinator's
	// own refusal, so that the group handler's check answers.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(meta.Brokers) == 0 {
		t.Fatalf("metadata: %v", err)
	}
	direct := func(req kmsg.Request) (kmsg.Response, error) {
		return cl.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, req)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "denied", 10_000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jr, err := join.RequestWith(ctx, cl)
	for _, tc := range []struct {
		name      string
		got, want int16
	}{
		{"join without group read", func() int16 {
			if err != nil {
				return codeOf(t, err) // FindCoordinator already refuses
			}
			return jr.ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
		{"commit without group read", commit("denied", "events"), kerr.GroupAuthorizationFailed.Code},
		{"commit without topic read", commit("allowed", "hidden"), kerr.TopicAuthorizationFailed.Code},
		{"commit of an unknown topic", commit("allowed", "nope"), kerr.UnknownTopicOrPartition.Code},
		{"commit with both", commit("allowed", "events"), 0},
		{"heartbeat without group read", func() int16 {
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID = "denied", "m"
			hr, err := direct(hb)
			if err != nil {
				return codeOf(t, err)
			}
			return hr.(*kmsg.HeartbeatResponse).ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
		{"sync without group read", func() int16 {
			sy := kmsg.NewPtrSyncGroupRequest()
			sy.Group, sy.MemberID = "denied", "m"
			sr, err := direct(sy)
			if err != nil {
				return codeOf(t, err)
			}
			return sr.(*kmsg.SyncGroupResponse).ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
		{"leave without group read", func() int16 {
			lv := kmsg.NewPtrLeaveGroupRequest()
			lv.Group = "denied"
			lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			lr, err := direct(lv)
			if err != nil {
				return codeOf(t, err)
			}
			return lr.(*kmsg.LeaveGroupResponse).ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
		{"offset delete without group delete", func() int16 {
			od := kmsg.NewPtrOffsetDeleteRequest()
			od.Group = "allowed"
			or, err := od.RequestWith(ctx, cl)
			if err != nil {
				return codeOf(t, err)
			}
			return or.ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
		{"delete without group delete", func() int16 {
			del := kmsg.NewPtrDeleteGroupsRequest()
			del.Groups = []string{"allowed"}
			dr, err := del.RequestWith(ctx, cl)
			if err != nil {
				return codeOf(t, err)
			}
			return dr.Groups[0].ErrorCode
		}(), kerr.GroupAuthorizationFailed.Code},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(tc.got), kerr.ErrorForCode(tc.want))
		}
	}
}

// codeOf is the Kafka code of a client error that is one.
func codeOf(t *testing.T, err error) int16 {
	t.Helper()
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		t.Fatalf("not a Kafka error: %v", err)
	}
	return ke.Code
}
