package replicated

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/lag"
)

// A Kafka client commits a group's offsets; the broker that coordinates
// the group measures its lag against its own replicas and reports it; the
// tenant reads it from the control plane.
func TestGroupLagFromTheCoordinator(t *testing.T) {
	const parts, group = 2, "lagging"
	c, tn := startGroupCell(t, parts, "orders", 2)
	counts := produceN(t, c, tn, "orders", parts, 400)
	cl := c.client(t, tn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Partition 0 half read, partition 1 caught up: a simple consumer's
	// commits (no members, generation -1).
	want := []int64{counts[0] / 2, counts[1]}
	celltest.WaitFor(t, 60*time.Second, "the commit is accepted", func() bool {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		for p, off := range want {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(p), off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Logf("commit: %v", err)
			return false
		}
		for _, p := range resp.Topics[0].Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Logf("commit partition %d: %v", p.Partition, err)
				return false
			}
		}
		return true
	})

	// The coordinating broker is the one whose coordinator holds the offsets.
	coord := -1
	celltest.WaitFor(t, 30*time.Second, "a coordinator holds the commits", func() bool {
		for b, co := range c.coords {
			if co != nil && len(co.AllCommitted()) == parts {
				coord = b
				return true
			}
		}
		return false
	})
	co := c.coords[coord]
	tr, err := lag.New(lag.Config{
		Committed: func() []lag.Committed {
			var out []lag.Committed
			for _, o := range co.AllCommitted() {
				out = append(out, lag.Committed{TenantID: o.TenantID, Group: o.Group, TopicID: o.TopicID, Partition: o.Partition,
					Offset: o.Offset, CommittedAt: o.CommittedAt})
			}
			return out
		},
		Partition: func(id string, p int32) (lag.Partition, bool) {
			if id != c.topicID || int(p) >= parts {
				return nil, false
			}
			return lag.ReplicaPartition(c.cell.Replica(coord, int(p))), true
		},
		Topic: c.states[coord].View().TopicByID,
		Every: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var ls []lag.Lag
	celltest.WaitFor(t, 30*time.Second, "the coordinator's replicas apply every record", func() bool {
		ls = tr.Lag()
		return len(ls) == parts && ls[0].Measured && ls[1].Measured &&
			ls[0].HighWatermark == counts[0] && ls[1].HighWatermark == counts[1]
	})
	l0, l1 := ls[0], ls[1]
	if l0.TenantID != tn.Tenant.ID || l0.Group != group || l0.Topic != "orders" || l0.Offset != want[0] ||
		l0.Records != counts[0]-want[0] || l0.Bytes <= 0 || l0.Seconds < 0 || l0.Seconds > 600 || l0.Expired ||
		l0.RetentionFraction < 0 || l0.RetentionFraction >= 1 {
		t.Fatalf("partition 0: %+v", l0)
	}
	if l1.Records != 0 || l1.Bytes != 0 || l1.Seconds != 0 || l1.RetentionFraction != 0 {
		t.Fatalf("partition 1 is caught up: %+v", l1)
	}

	// The coordinator's report reaches the tenant through the control plane.
	rep, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: fmt.Sprintf("%s-b%d", cptest.Cell, coord+1),
		API: c.cp.CellClient(), DataDir: t.TempDir(), Groups: tr.Report})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.ReportOnce(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := tn.Key.Group(ctx, group)
	if err != nil || len(g.Partitions) != parts || g.LagRecords != l0.Records || g.Partitions[0].CommittedOffset == nil || *g.Partitions[0].CommittedOffset != want[0] ||
		g.Partitions[0].HighWatermark != counts[0] || g.Partitions[1].LagRecords != 0 {
		t.Fatalf("the tenant reads %+v, %v", g, err)
	}
}
