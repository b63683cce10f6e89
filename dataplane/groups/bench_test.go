package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
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
	cell := celltest.New(b, celltest.Options{Partitions: 1, Raft: partition.DefaultRaftConfig})
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
	return co, l
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
	ctx := context.Background()
	const commits = 10_000
	// Many groups commit concurrently, as a busy cell's would.
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
	b.ResetTimer()
	for range b.N {
		groups, records, err := co.replay(l)
		if err != nil || records != commits*12 || len(groups) != 500 {
			b.Fatalf("replay: %d records, %d groups, %v", records, len(groups), err)
		}
	}
	b.ReportMetric(float64(commits*12*b.N)/b.Elapsed().Seconds(), "records/s")
}
