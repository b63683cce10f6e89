package controlplane_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/contract/wire"
)

// TestTopicShowsPartitionStatus: a topic's partitions carry what its
// brokers last reported: the leader with the newest epoch, and that
// leader's own log start offset, high watermark and size. A partition
// nobody reported on has none of them.
func TestTopicShowsPartitionStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("pstatus")
	tid := e.createTopic(a, "orders", 2)
	cell := e.cellClient()
	report := func(broker string, ps ...wire.PartitionStatus) {
		t.Helper()
		if err := cell.CellReport(ctx, "cell-1", wire.Report{Version: wire.Version, BrokerID: broker, Partitions: ps}); err != nil {
			t.Fatalf("report of %s: %v", broker, err)
		}
	}
	// Node 2 led partition 0 in epoch 3 and stopped reporting; node 1 leads
	// it in epoch 4. Node 3 follows, a little behind.
	report("cell-1-b2", wire.PartitionStatus{TopicID: tid, Partition: 0, LeaderNode: 2, LeaderEpoch: 3, LogEndOffset: 5, HighWatermark: 5, SizeBytes: 500})
	report("cell-1-b1", wire.PartitionStatus{TopicID: tid, Partition: 0, LeaderNode: 1, LeaderEpoch: 4, LogStartOffset: 2, LogEndOffset: 9, HighWatermark: 9, SizeBytes: 900})
	report("cell-1-b3", wire.PartitionStatus{TopicID: tid, Partition: 0, LeaderNode: 1, LeaderEpoch: 4, LogStartOffset: 2, LogEndOffset: 8, HighWatermark: 8, SizeBytes: 800})

	tp, err := a.key.Topic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Assignments) != 2 {
		t.Fatalf("assignments: %+v", tp.Assignments)
	}
	p0, p1 := tp.Assignments[0], tp.Assignments[1]
	if p0.Leader == nil || *p0.Leader != 1 || *p0.LeaderEpoch != 4 || *p0.LogStartOffset != 2 || *p0.HighWatermark != 9 ||
		*p0.SizeBytes != 900 || p0.ReportedAt == nil {
		t.Errorf("partition 0: %+v, want leader 1 (epoch 4) with its own offsets 2..9 and 900 bytes", p0)
	}
	if p1.Leader != nil || p1.HighWatermark != nil || p1.SizeBytes != nil || len(p1.Replicas) != 3 {
		t.Errorf("partition 1 was never reported on: %+v", p1)
	}

	// The operator's tenant list shows what the tenant stores: the
	// largest replica of each partition (partition 1 has none yet).
	at, err := e.op.AdminTenant(ctx, a.Tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if at.StoredBytes != 900 {
		t.Errorf("stored bytes %d, want 900", at.StoredBytes)
	}
}
