package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// benchReplica maps celltest's server ids ("b0") to node ids (1).
type benchReplica struct{ *partition.Replica }

func (r benchReplica) Leader() (int, bool) {
	if r.IsLeader() {
		return benchNode(r.ID())
	}
	id, _ := r.LeaderID()
	if id == "" || id == r.ID() {
		return -1, false
	}
	return benchNode(id)
}

func benchNode(id raft.ServerID) (int, bool) {
	var b int
	if _, err := fmt.Sscanf(string(id), "b%d", &b); err != nil {
		return -1, false
	}
	return b + 1, true
}

// benchCoordinator is a coordinator on the leader of a one-partition,
// three-broker Raft cell (real transport, fsync on every commit, the
// brokers' Raft timeouts).
func benchCoordinator(b *testing.B) (*Coordinator, Log) {
	co, l, _ := benchCoordinatorOn(b, celltest.Options{}, nil)
	return co, l
}

// benchCoordinatorOn is benchCoordinator on a cell with opts's Log
// config and, if set, settings on every replica.
func benchCoordinatorOn(b *testing.B, opts celltest.Options, settings *partition.Settings) (*Coordinator, Log, *celltest.Cell) {
	opts.Partitions, opts.Raft = 1, partition.DefaultRaftConfig
	cell := celltest.New(b, opts)
	if settings != nil {
		for br := range cell.Brokers() {
			if err := cell.Replica(br, 0).SetSettings(*settings); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The preferred leader (broker 0), which nothing moves away.
	celltest.WaitFor(b, 60*time.Second, "broker 0 to lead", func() bool { return cell.Leader(0) == 0 })
	leader := 0
	l := benchReplica{cell.Replica(leader, 0)}
	co, err := New(Config{NodeID: leader + 1, Partitions: 1, CheckInterval: 5 * time.Millisecond,
		Offsets: func(int32) (Log, bool) { return l, true }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { co.Close() })
	celltest.WaitFor(b, 30*time.Second, "the coordinator loaded", func() bool {
		_, local, _ := co.Locate("t", "g")
		return local
	})
	return co, l, cell
}

func commitsOf(parts int, off int64) []OffsetCommit {
	out := make([]OffsetCommit, parts)
	for p := range out {
		out[p] = OffsetCommit{TopicPartition: TopicPartition{TopicID: "3f2a9c1e-topic", Partition: int32(p)}, Offset: off, LeaderEpoch: 1}
	}
	return out
}

// BenchmarkCommitOffsets: one OffsetCommit of 12 partitions, acknowledged
// once a Raft majority has it on disk. Sequential: it measures latency.
func BenchmarkCommitOffsets(b *testing.B) {
	co, _ := benchCoordinator(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := co.CommitOffsets(ctx, "t", "g", "", "", -1, commitsOf(12, int64(i))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad: replaying an offsets partition that holds 10,000 commits
// of 12 partitions (120,000 records), as a new leader does before it
// serves. One op = one whole replay.
func BenchmarkLoad(b *testing.B) {
	co, l := benchCoordinator(b)
	const commits = 10_000
	commitHistory(b, co, commits)
	b.ResetTimer()
	for range b.N {
		groups, _, records, err := co.replay(l)
		if err != nil || records != commits*12 || len(groups) != 500 {
			b.Fatalf("replay: %d records, %d groups, %v", records, len(groups), err)
		}
	}
	b.ReportMetric(float64(commits*12*b.N)/b.Elapsed().Seconds(), "records/s")
}

// commitHistory commits commits times 12 partitions for 500 groups, 64
// at a time, as a busy cell's groups would.
func commitHistory(b *testing.B, co *Coordinator, commits int) {
	ctx := context.Background()
	errs := make(chan error, 64)
	for w := range 64 {
		go func() {
			var err error
			for i := w; i < commits && err == nil; i += 64 {
				err = co.CommitOffsets(ctx, "t", fmt.Sprintf("g%d", i%500), "", "", -1, commitsOf(12, int64(i)))
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadCompaction: replaying a compacted offsets partition that
// holds 10,000 commits of 12 partitions by 500 groups (120,000 records,
// 1 MiB segments), before compaction, and after every replica compacted
// it to the live 6,000 records (500 groups × 12 partitions). One op = one
// whole replay.
func BenchmarkLoadCompaction(b *testing.B) {
	settings := partition.Settings{
		Log:        log.Settings{SegmentBytes: 1 << 20, SegmentAge: 300 * time.Millisecond, RetentionAge: -1, Compacted: true},
		Compaction: partition.CompactionSettings{DeleteRetention: 24 * time.Hour, MinDirtyRatio: 0.5},
	}
	co, l, cell := benchCoordinatorOn(b, celltest.Options{Log: log.Config{Compacted: true, SegmentBytes: 1 << 20}}, &settings)
	const commits, live = 10_000, 500 * 12
	commitHistory(b, co, commits)
	replay := func(b *testing.B, want int) {
		for range b.N {
			groups, _, records, err := co.replay(l)
			if err != nil || records != want || len(groups) != 500 {
				b.Fatalf("replay: %d records (want %d), %d groups, %v", records, want, len(groups), err)
			}
		}
		b.ReportMetric(float64(want), "records/op")
	}
	b.Run("before", func(b *testing.B) { replay(b, commits*12) })
	celltest.WaitFor(b, 2*time.Minute, "the offsets partition compacted", func() bool {
		for br := range cell.Brokers() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cell.Replica(br, 0).CompactionPass(ctx, time.Now(), 0)
			cancel()
			if err != nil {
				b.Logf("compaction pass: %v", err)
				return false
			}
		}
		_, _, records, err := co.replay(l)
		return err == nil && records == live
	})
	b.Run("after", func(b *testing.B) { replay(b, live) })
}
