package replicated

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestGroupOldProtocolVersions runs a consumer group whose client speaks
// only older versions of the group APIs (those of kafkajs and of clients
// from Kafka 0.10 to 2.x): it consumes everything, commits, and lists,
// describes, reads the offsets of and deletes the group.
func TestGroupOldProtocolVersions(t *testing.T) {
	const (
		parts = 3
		topic = "legacy"
		n     = 600
	)
	c, tn := startReadyGroupCell(t, parts, topic, 2)
	counts := produceN(t, c, tn, topic, parts, n)
	type caps struct{ join, sync, hb, leave, commit, fetch, find, list, describe, del int16 }
	for _, tc := range []struct {
		name string
		caps caps
	}{
		{"kafkajs", caps{join: 5, sync: 3, hb: 3, leave: 2, commit: 5, fetch: 4, find: 2, list: 2, describe: 2, del: 1}},
		{"kafka-0.11", caps{join: 2, sync: 1, hb: 1, leave: 1, commit: 3, fetch: 3, find: 1, list: 1, describe: 1, del: 0}},
		{"kafka-0.10", caps{join: 1, sync: 0, hb: 0, leave: 0, commit: 2, fetch: 1, find: 0, list: 0, describe: 0, del: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := kversion.Stable()
			for key, v := range map[int16]int16{11: tc.caps.join, 14: tc.caps.sync, 12: tc.caps.hb, 13: tc.caps.leave, 8: tc.caps.commit,
				9: tc.caps.fetch, 10: tc.caps.find, 16: tc.caps.list, 15: tc.caps.describe, 42: tc.caps.del} {
				vs.SetMaxKeyVersion(key, v)
			}
			group := "legacy-" + tc.name
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cl := c.client(t, tn, kgo.MaxVersions(vs), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
				kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
			for read := 0; read < n; {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("read %d of %d: %v", read, n, ctx.Err())
				}
				read += fs.NumRecords()
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			// OffsetFetch at the capped version.
			of := kmsg.NewPtrOffsetFetchRequest()
			of.Group = group
			ot := kmsg.NewOffsetFetchRequestTopic()
			ot.Topic = topic
			for p := range parts {
				ot.Partitions = append(ot.Partitions, int32(p))
			}
			of.Topics = append(of.Topics, ot)
			ofr, err := of.RequestWith(ctx, cl)
			if err != nil || kerr.ErrorForCode(ofr.ErrorCode) != nil {
				t.Fatalf("offset fetch: %v %v", err, kerr.ErrorForCode(ofr.ErrorCode))
			}
			for _, p := range ofr.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Offset != counts[p.Partition] {
					t.Fatalf("partition %d committed at %d (%v), want %d", p.Partition, p.Offset, kerr.ErrorForCode(p.ErrorCode), counts[p.Partition])
				}
			}
			member, _ := cl.GroupMetadata()
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Groups = []string{group}
			dr, err := dg.RequestWith(ctx, cl)
			if err != nil || len(dr.Groups) != 1 || dr.Groups[0].State != "Stable" || len(dr.Groups[0].Members) != 1 || dr.Groups[0].Members[0].MemberID != member {
				t.Fatalf("describe: %v %+v", err, dr)
			}
			found := false
			for node := 1; node <= 3; node++ {
				lr, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl.Broker(node))
				if err != nil {
					t.Fatalf("list groups: %v", err)
				}
				for _, g := range lr.Groups {
					found = found || g.Group == group
				}
			}
			if !found {
				t.Fatal("no broker lists the group")
			}
			cl.Close() // leaves the group
			celltest.WaitFor(t, 30*time.Second, "the group to be deleted once empty", func() bool {
				del := kmsg.NewPtrDeleteGroupsRequest()
				del.Groups = []string{group}
				dr, err := del.RequestWith(ctx, c.client(t, tn, kgo.MaxVersions(vs)))
				return err == nil && dr.Groups[0].ErrorCode == 0
			})
		})
	}
}

// TestStaticMemberRestart: a static member (group.instance.id) that
// restarts takes its place back under a new member id without leaving;
// its old member id is fenced (FENCED_INSTANCE_ID), and the group keeps
// exactly its two members.
func TestStaticMemberRestart(t *testing.T) {
	const (
		parts = 4
		topic = "static"
		group = "statics"
	)
	c, tn := startReadyGroupCell(t, parts, topic, 2)
	produceN(t, c, tn, topic, parts, 400)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	static := func(inst string) *kgo.Client {
		return c.client(t, tn, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID(inst),
			kgo.SessionTimeout(20*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	}
	members := func() map[string]string {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{group}
		cl := c.client(t, tn)
		dr, err := dg.RequestWith(ctx, cl)
		cl.Close()
		if err != nil || len(dr.Groups) != 1 {
			t.Fatalf("describe: %v", err)
		}
		out := map[string]string{}
		if dr.Groups[0].State != "Stable" {
			return nil
		}
		for _, m := range dr.Groups[0].Members {
			out[deref(m.InstanceID)] = m.MemberID
		}
		return out
	}
	a, b := static("a"), static("b")
	go a.PollFetches(ctx)
	go b.PollFetches(ctx)
	var before map[string]string
	celltest.WaitFor(t, 60*time.Second, "both static members in a stable group", func() bool {
		before = members()
		ma, _ := a.GroupMetadata()
		mb, _ := b.GroupMetadata()
		return len(before) == 2 && before["a"] == ma && before["b"] == mb
	})
	_, gen := a.GroupMetadata()
	a.Close() // a static member does not leave on close
	if m := members(); len(m) != 2 || m["a"] != before["a"] {
		t.Fatalf("after closing static member a: %v, want it still in the group as %s", m, before["a"])
	}

	a2 := static("a")
	go a2.PollFetches(ctx)
	var after map[string]string
	celltest.WaitFor(t, 60*time.Second, "the restarted member in the group under a new id", func() bool {
		after = members()
		m, _ := a2.GroupMetadata()
		return len(after) == 2 && after["a"] == m && m != before["a"]
	})
	if after["b"] != before["b"] {
		t.Fatalf("member b changed from %s to %s", before["b"], after["b"])
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	inst := "a"
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = group, before["a"], &inst, gen
	hr, err := hb.RequestWith(ctx, b)
	if err != nil || hr.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("heartbeat with the replaced member id: %v %v, want FENCED_INSTANCE_ID", err, kerr.ErrorForCode(hr.ErrorCode))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestFindCoordinator: batched group keys (v4) each get the leader of
// their offsets partition; a transaction coordinator is refused with a
// message saying so.
func TestFindCoordinator(t *testing.T) {
	c, tn := startGroupCell(t, 1, "t", 3)
	c.waitCoordinators()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.client(t, tn)
	keys := []string{"g1", "g2", "g3", "g4", "g5"}
	var resp *kmsg.FindCoordinatorResponse
	celltest.WaitFor(t, 20*time.Second, "every key's coordinator loaded", func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = keys
		var err error
		if resp, err = req.RequestWith(ctx, cl); err != nil || len(resp.Coordinators) != len(keys) {
			return false
		}
		for _, co := range resp.Coordinators {
			if co.ErrorCode != 0 || co.NodeID < 1 || co.NodeID > 3 {
				return false
			}
			if _, local, _ := c.coords[co.NodeID-1].Locate(tn.Tenant.ID, co.Key); !local {
				return false // answered while leadership moved; ask again
			}
		}
		return true
	})
	seen := map[string]bool{}
	for _, co := range resp.Coordinators {
		seen[co.Key] = true
		_, local, err := c.coords[co.NodeID-1].Locate(tn.Tenant.ID, co.Key)
		if err != nil || !local || net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port))) != c.addrs[co.NodeID-1] {
			t.Fatalf("coordinator of %s: %+v (coordinates it: %v, %v)", co.Key, co, local, err)
		}
	}
	if len(seen) != len(keys) {
		t.Fatalf("answered keys %v, asked %v", seen, keys)
	}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKeys = 1, []string{"my-txn"}
	tr, err := txn.RequestWith(ctx, cl)
	if err != nil || tr.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code || tr.Coordinators[0].ErrorMessage == nil {
		t.Fatalf("transaction coordinator: %v %+v", err, tr)
	}
	t.Logf("transaction coordinator refused: %s", *tr.Coordinators[0].ErrorMessage)
}
