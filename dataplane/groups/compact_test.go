package groups_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// compactedOffsets are offsets-partition settings as replicas gives them
// (compacted, tombstones kept for delete.retention.ms), with small segments
// and a short segment.ms so that a test's commits fill several segments and
// the tail rolls soon.
var compactedOffsets = partition.Settings{
	MaxBatchBytes: log.DefaultMaxBatchBytes,
	Log:           log.Settings{SegmentBytes: 16 << 10, SegmentAge: 300 * time.Millisecond, RetentionAge: -1, Compacted: true},
	Compaction:    partition.CompactionSettings{DeleteRetention: time.Hour, MinDirtyRatio: 0.2},
}

// offsetsRecords reads a replica's local log of the offsets partition
// from its log start to its high watermark and counts its records and
// tombstones.
func offsetsRecords(t *testing.T, r *partition.Replica) (records, tombstones int) {
	t.Helper()
	l, hw := r.Store().Log(), r.HighWatermark()
	for off := l.LogStartOffset(); ; {
		sl, err := l.Read(off, 1<<20, hw)
		if err != nil {
			t.Fatalf("fetch %d: %v", off, err)
		}
		b, err := sl.AppendTo(nil)
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return records, tombstones
		}
		recs, err := celltest.KeyedRecords(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			records++
			if rec.Value == nil {
				tombstones++
			}
		}
		off = next
	}
}

// TestCoordinatorLoadsCompactedOffsets: an offsets partition written with
// hundreds of superseded commits, deleted offsets and a deleted group is
// compacted on every replica (superseded records and expired tombstones
// gone, gaps up to the high watermark); the next leader's coordinator
// loads exactly the live state from what is left: the newest offsets, no
// deleted offset or group, an emptied group at its generation.
func TestCoordinatorLoadsCompactedOffsets(t *testing.T) {
	cell := celltest.New(t, celltest.Options{Partitions: 1, Raft: partition.DefaultRaftConfig, CheckInterval: time.Hour,
		Log: log.Config{Compacted: true, SegmentBytes: 16 << 10}})
	for b := range cell.Brokers() {
		if err := cell.Replica(b, 0).SetSettings(compactedOffsets); err != nil {
			t.Fatal(err)
		}
	}
	coords := coordinatorsOn(t, cell, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const tenant = "tenant-1"
	b := waitCoordinator(t, coords, tenant, "g", -1)
	co := coords[b]
	tp := func(p int32) groups.TopicPartition { return groups.TopicPartition{TopicID: "topic-x", Partition: p} }

	// A member group: joined, synced, committed, left (Empty at the next
	// generation, its group record rewritten).
	jr, err := co.Join(ctx, groups.JoinRequest{TenantID: tenant, Group: "m", InstanceID: "i-1", ClientID: "c", ProtocolType: "consumer",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, Protocols: []groups.Protocol{{Name: "range", Metadata: []byte("sub")}}})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, err := co.Sync(ctx, tenant, "m", jr.MemberID, "i-1", jr.Generation, map[string][]byte{jr.MemberID: []byte("all")}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if err := co.CommitOffsets(ctx, tenant, "m", jr.MemberID, "i-1", jr.Generation, []groups.OffsetCommit{{TopicPartition: tp(0), Offset: 7}}); err != nil {
		t.Fatalf("member commit: %v", err)
	}
	leaveWritten(ctx, t, cell, b, co, tenant, "m", "i-1")

	// Simple groups: "g" commits four partitions 300 times (each commit
	// superseding the last), then deletes partition 3's offset; "gone" is
	// committed and deleted.
	const rounds = 300
	for i := range rounds {
		var cs []groups.OffsetCommit
		for p := range int32(4) {
			cs = append(cs, groups.OffsetCommit{TopicPartition: tp(p), Offset: int64(i*10) + int64(p), Metadata: fmt.Sprintf("round %d", i)})
		}
		if err := co.CommitOffsets(ctx, tenant, "g", "", "", -1, cs); err != nil {
			t.Fatalf("commit round %d: %v", i, err)
		}
	}
	if err := co.DeleteOffsets(ctx, tenant, "g", []groups.TopicPartition{tp(3)}); err != nil {
		t.Fatalf("delete offsets: %v", err)
	}
	if err := co.CommitOffsets(ctx, tenant, "gone", "", "", -1, []groups.OffsetCommit{{TopicPartition: tp(0), Offset: 1}, {TopicPartition: tp(1), Offset: 2}}); err != nil {
		t.Fatalf("commit gone: %v", err)
	}
	if errs := co.DeleteGroups(ctx, tenant, []string{"gone"}); errs["gone"] != nil {
		t.Fatalf("delete group: %v", errs)
	}
	written, _ := offsetsRecords(t, cell.Replica(b, 0))

	// Compaction passes, the leader's first, first with the clock (a
	// decision whose point covers the tombstones: they expire only
	// delete.retention.ms after one), then with a clock two hours ahead
	// (past the tombstones' delete.retention.ms), until every replica
	// has cleaned with the replicated decision and holds no tombstone and
	// at most the live keys: m's group record and offset, g's three.
	end := cell.Replica(b, 0).HighWatermark()
	now := time.Now()
	celltest.WaitFor(t, time.Minute, "a compaction decision covering every record", func() bool {
		lead := cell.Replica(cell.WaitLeader(0, 10*time.Second), 0)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		err := lead.CompactionPass(pctx, now, 0)
		pcancel()
		upTo, _ := lead.CompactedTo()
		return err == nil && upTo >= end
	})
	now = now.Add(2 * time.Hour)
	const live = 5
	var left, tombs int
	celltest.WaitFor(t, time.Minute, "the offsets partition compacted on every replica", func() bool {
		order := []int{cell.WaitLeader(0, 10*time.Second)}
		for o := range cell.Brokers() {
			if o != order[0] {
				order = append(order, o)
			}
		}
		done := true
		for _, o := range order {
			r := cell.Replica(o, 0)
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			err := r.CompactionPass(pctx, now, 0)
			pcancel()
			if err != nil {
				t.Logf("compaction pass on broker %d: %v", o, err)
				return false
			}
			_, applied := r.CompactedTo()
			left, tombs = offsetsRecords(t, r)
			done = done && applied && tombs == 0 && left <= live
		}
		return done
	})
	t.Logf("offsets partition: %d records written, %d left after compaction", written, left)
	if written < 4*rounds {
		t.Fatalf("only %d records written", written)
	}

	// The next leader loads what compaction left.
	if err := cell.Replica(b, 0).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	nco := coords[waitCoordinator(t, coords, tenant, "g", b)]
	got, err := nco.FetchOffsets(ctx, tenant, "g", nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("g's offsets after compaction and failover: %+v %v", got, err)
	}
	for p := range int32(3) {
		if c := got[tp(p)]; c.Offset != int64((rounds-1)*10)+int64(p) || c.Metadata != fmt.Sprintf("round %d", rounds-1) {
			t.Errorf("partition %d: %+v, want the last round's commit", p, c)
		}
	}
	if _, err := nco.DescribeGroup(tenant, "gone"); !errors.Is(err, groups.ErrGroupNotFound) {
		t.Fatalf("deleted group after compaction and failover: %v", err)
	}
	d, err := nco.DescribeGroup(tenant, "m")
	if err != nil || d.State != groups.StateEmpty || len(d.Members) != 0 || d.Generation != jr.Generation+1 {
		t.Fatalf("emptied group after compaction and failover: %+v %v", d, err)
	}
	if mo, err := nco.FetchOffsets(ctx, tenant, "m", nil); err != nil || len(mo) != 1 || mo[tp(0)].Offset != 7 {
		t.Fatalf("m's offsets after compaction and failover: %+v %v", mo, err)
	}
}
