package replicated

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// TestGroupTenantIsolation: tenant B cannot list, describe, join, sync,
// heartbeat, commit to, fetch the offsets of, or delete tenant A's group,
// and every answer B gets for A's group name is the answer for a group
// that does not exist. A's group is untouched afterwards.
func TestGroupTenantIsolation(t *testing.T) {
	const (
		topic  = "events"
		group  = "secret-group"
		absent = "no-such-group"
	)
	c, a := startGroupCell(t, 2, topic, 2)
	b := c.cp.Signup("beta", "admin")
	cellstack.WaitKnown(t, 20*time.Second, keyOf(b), "", c.states...)
	for p := range 2 {
		c.cell.WaitLeader(p, 30*time.Second)
	}
	c.waitCoordinators()
	counts := produceN(t, c, a, topic, 2, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Tenant A's group: one member, stable, with commits at the ends.
	ca := c.client(t, a, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	for read := 0; read < 200; {
		fs := ca.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("tenant A consumed %d: %v", read, ctx.Err())
		}
		read += fs.NumRecords()
	}
	if err := ca.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("tenant A commit: %v", err)
	}
	aMember, aGen := ca.GroupMetadata()
	wantA, err := committed(ctx, t, ca, group, topic, 2)
	if err != nil || wantA[0] != counts[0] || wantA[1] != counts[1] {
		t.Fatalf("tenant A's commits %v (%v), want %v", wantA, err, counts)
	}

	cb := c.client(t, b)
	ask := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cb.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}

	// ListGroups on every broker: A sees its group somewhere, B nowhere.
	listed := func(cl *kgo.Client) []string {
		var names []string
		for node := int32(1); node <= 3; node++ {
			resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl.Broker(int(node)))
			if err != nil {
				t.Fatalf("list groups on node %d: %v", node, err)
			}
			for _, g := range resp.Groups {
				names = append(names, g.Group)
			}
		}
		return names
	}
	if got := listed(ca); len(got) != 1 || got[0] != group {
		t.Fatalf("tenant A lists %v", got)
	}
	if got := listed(cb); len(got) != 0 {
		t.Fatalf("tenant B lists %v", got)
	}

	cases := []struct {
		name string
		req  func(g string) kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{"describe", func(g string) kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{g}
			return r
		}, func(r kmsg.Response) int16 {
			d := r.(*kmsg.DescribeGroupsResponse).Groups[0]
			if d.State != "Dead" || len(d.Members) != 0 {
				t.Errorf("describe: state %s with %d members", d.State, len(d.Members))
			}
			return d.ErrorCode
		}, 0},
		{"heartbeat with A's member", func(g string) kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID, r.Generation = g, aMember, aGen
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, kerr.UnknownMemberID.Code},
		{"sync as A's member", func(g string) kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID, r.Generation = g, aMember, aGen
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, kerr.UnknownMemberID.Code},
		{"leave as A's member", func(g string) kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group = g
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = aMember
			r.Members = append(r.Members, m)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).Members[0].ErrorCode }, kerr.UnknownMemberID.Code},
		{"commit as A's member", func(g string) kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.MemberID, r.Generation = g, aMember, aGen
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }, kerr.UnknownTopicOrPartition.Code},
		{"fetch offsets", func(g string) kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g // all topics
			r.Groups = append(r.Groups, rg)
			return r
		}, func(r kmsg.Response) int16 {
			g := r.(*kmsg.OffsetFetchResponse).Groups[0]
			if len(g.Topics) != 0 {
				t.Errorf("fetch offsets: %d topics", len(g.Topics))
			}
			return g.ErrorCode
		}, 0},
		{"delete", func(g string) kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{g}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }, kerr.GroupIDNotFound.Code},
		{"delete offsets", func(g string) kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = g
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }, kerr.GroupIDNotFound.Code},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, none := tc.code(ask(tc.req(group))), tc.code(ask(tc.req(absent)))
			if got != none || got != tc.want {
				t.Fatalf("tenant B on A's group: %v; on a missing group: %v; want %v for both",
					kerr.ErrorForCode(got), kerr.ErrorForCode(none), kerr.ErrorForCode(tc.want))
			}
		})
	}

	// B joining the name gets a group of its own, with only itself in it.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group, 10_000, 10_000, "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	var jr *kmsg.JoinGroupResponse
	celltest.WaitFor(t, 30*time.Second, "tenant B's join to complete", func() bool {
		jr = ask(join).(*kmsg.JoinGroupResponse)
		switch jr.ErrorCode {
		case kerr.MemberIDRequired.Code:
			join.MemberID = jr.MemberID // join again with it, as clients do
			return false
		case kerr.UnknownMemberID.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
			join.MemberID = "" // the coordinator moved: start over, as clients do
			return false
		}
		return true
	})
	if jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || jr.Members[0].MemberID != jr.MemberID || jr.Generation != 1 {
		t.Fatalf("tenant B's join of %q: %v, generation %d, leader %s, members %+v; want a new group of B alone",
			group, kerr.ErrorForCode(jr.ErrorCode), jr.Generation, jr.LeaderID, jr.Members)
	}

	// Nobody sees the internal offsets topic: not in a full listing, not
	// by its id used as a name, and not readable.
	for _, cl := range []*kgo.Client{ca, cb} {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, mt := range md.Topics {
			if deref(mt.Topic) != topic {
				t.Fatalf("metadata lists topic %q", deref(mt.Topic))
			}
		}
		name := groups.OffsetsTopicID
		if md, err = metadataRequest(name).RequestWith(ctx, cl); err != nil || md.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("metadata of %s: %v %+v", name, err, md)
		}
		lr, err := listOffsetsRequest(name, 0, -2).RequestWith(ctx, cl.Broker(1))
		if err != nil || lr.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("list offsets of %s: %v %+v", name, err, lr)
		}
	}

	// A's group is untouched.
	if m, g := ca.GroupMetadata(); m != aMember || g != aGen {
		t.Fatalf("tenant A's member is %s at generation %d, was %s at %d", m, g, aMember, aGen)
	}
	if got, err := committed(ctx, t, ca, group, topic, 2); err != nil || got[0] != wantA[0] || got[1] != wantA[1] {
		t.Fatalf("tenant A's commits are %v (%v), were %v", got, err, wantA)
	}
}
