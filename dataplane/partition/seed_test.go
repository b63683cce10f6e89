package partition_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// seedLog is the partition log configuration of the seeding tests: small
// segments and a retention by size that keeps about eight of them (the
// test batches carry timestamp 0: any retention by age deletes them all).
var seedLog = log.Config{SegmentBytes: 8 << 10, RetentionBytes: 64 << 10, RetentionAge: -1}

// stopAppliedFollower produces 5 KiB to partition 0, waits for a
// follower to apply it and stops that follower's broker, which it returns.
func stopAppliedFollower(t *testing.T, c *celltest.Cell) int {
	t.Helper()
	// Partition 0's preferred replica is broker 0's. Under load another
	// may win the first election; the leader then hands leadership to
	// broker 0 once it is caught up, and a produce caught in that handover
	// fails with its outcome unknown. Starting from broker 0 leading, the
	// follower stopped here is never the preferred one, and no handover
	// comes.
	celltest.WaitFor(t, waitLong, "the preferred replica (broker 0) to lead", func() bool { return c.Leader(0) == 0 })
	leadB := c.WaitLeader(0, waitLong)
	produceKiB(t, c, 5)
	down := (leadB + 1) % c.Brokers()
	celltest.WaitFor(t, waitLong, "the follower to apply", func() bool {
		return c.Replica(down, 0).HighWatermark() == c.Replica(leadB, 0).HighWatermark()
	})
	c.StopBroker(down)
	return down
}

// produceKiB produces n batches of one 1 KiB record each to partition 0.
func produceKiB(t *testing.T, c *celltest.Cell, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		_, err := c.Produce(ctx, 0, celltest.Batch([]byte(fmt.Sprintf("%04d", i)), bytes.Repeat([]byte{byte(i)}, 1<<10)))
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// retainUntil runs retention passes until the leader's files start above
// offset: the batches below are gone everywhere the passes ran.
func retainUntil(t *testing.T, c *celltest.Cell, offset int64) *partition.Replica {
	t.Helper()
	var lead *partition.Replica
	celltest.WaitFor(t, waitLong, fmt.Sprintf("the leader's files to start above %d", offset), func() bool {
		retentionPass(t, c)
		lead = c.Replica(c.WaitLeader(0, waitLong), 0)
		return lead.Store().Log().LogStartOffset() > offset
	})
	return lead
}

// segmentSums maps each closed segment file of a replica's log (all but the
// last, which still takes appends) to its SHA-256.
func segmentSums(t *testing.T, r *partition.Replica) map[int64][32]byte {
	t.Helper()
	segs := r.Store().Log().Segments()
	out := map[int64][32]byte{}
	for _, base := range segs[:len(segs)-1] {
		b, err := os.ReadFile(filepath.Join(logDir(r), log.SegmentFileName(base)))
		if err != nil {
			t.Fatal(err)
		}
		out[base] = sha256.Sum256(b)
	}
	return out
}

func logDir(r *partition.Replica) string {
	return filepath.Join(filepath.Dir(r.Store().SeedDir()), "log")
}

// sameBytes reads [from, to) from both replicas' logs and compares them.
func sameBytes(t *testing.T, a, b *partition.Replica, from, to int64) {
	t.Helper()
	if !bytes.Equal(celltest.StoredBytes(t, a, from, to), celltest.StoredBytes(t, b, from, to)) {
		t.Fatalf("replicas %s and %s hold different bytes in [%d, %d)", a.ID(), b.ID(), from, to)
	}
}

// fetchAll fetches through a leading replica from offset to its high
// watermark and returns the batches' bytes.
func fetchAll(t *testing.T, r *partition.Replica, from int64) []byte {
	t.Helper()
	var out []byte
	for {
		sl, hw, err := r.Fetch(from, math.MaxInt32)
		if err != nil {
			t.Fatalf("fetch %d from %s: %v", from, r.ID(), err)
		}
		if sl.Size == 0 {
			sl.Release()
			if from >= hw {
				return out
			}
			t.Fatalf("empty fetch at %d below the high watermark %d", from, hw)
		}
		out, err = sl.AppendTo(out)
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		from = sl.NextOffset
	}
}

// checkSeeded: the seeded replica r has the leader's log start and high
// watermark, each closed segment both hold has the same checksum (and it
// holds at least min of them), and it holds the same bytes.
func checkSeeded(t *testing.T, c *celltest.Cell, b, minSegs int) {
	t.Helper()
	r := c.Replica(b, 0)
	var lead *partition.Replica
	celltest.WaitFor(t, waitLong, "the seeded replica at the leader's log start and high watermark", func() bool {
		// Passes while a membership change settles may fail to take their
		// snapshot yet (Raft waits for the configuration entry): retried.
		for b := range c.Brokers() {
			if r := c.Replica(b, 0); r != nil {
				if err := r.RetentionPass(context.Background(), waitLong); err != nil {
					t.Logf("retention pass on broker %d: %v", b, err)
				}
			}
		}
		lead = c.Replica(c.WaitLeader(0, waitLong), 0)
		return !r.Seeding() && r.HighWatermark() == lead.HighWatermark() && r.LogStartOffset() == lead.LogStartOffset() &&
			r.Store().Log().LogStartOffset() == lead.Store().Log().LogStartOffset()
	})
	mine, theirs := segmentSums(t, r), segmentSums(t, lead)
	both := 0
	for base, sum := range mine {
		if other, ok := theirs[base]; ok {
			both++
			if sum != other {
				t.Fatalf("segment %d of the seeded replica differs from the leader's", base)
			}
		}
	}
	if both < minSegs {
		t.Fatalf("the seeded replica shares %d closed segments with the leader (%v, %v), want at least %d", both, mine, theirs, minSegs)
	}
	sameBytes(t, r, lead, lead.LogStartOffset(), lead.HighWatermark())
}

// TestFollowerSeededFromSegments: a follower stopped while retention
// deleted everything it has comes back behind the log start. It serves
// nothing while it copies the leader's segments; restarted midway it keeps
// the files it verified and copies only the rest; then it has the leader's
// log start, high watermark and segment files (by checksum), takes new
// entries again and, leading, serves the same records.
func TestFollowerSeededFromSegments(t *testing.T) {
	c := celltest.New(t, celltest.Options{Log: seedLog})
	down := stopAppliedFollower(t, c)
	produceKiB(t, c, 200)
	lead := retainUntil(t, c, 10)

	c.SetSeedRate(32 << 10) // about 2.5 s for the ~72 KiB left: time to look
	c.StartBroker(down)
	r := c.Replica(down, 0)
	celltest.WaitFor(t, waitLong, "the restarted follower to seed", func() bool { return c.Seeder(down).Copied() > 0 })
	if !r.Seeding() || r.SeedRemaining() == 0 {
		t.Fatalf("seeding %v, %d bytes left while copying", r.Seeding(), r.SeedRemaining())
	}
	if _, err := r.FetchEpoch(-1, lead.LogStartOffset(), 1<<20); err == nil {
		t.Fatal("a seeding replica served a fetch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := r.DeleteRecords(ctx, -1); err == nil {
		t.Fatal("a seeding replica took DeleteRecords")
	}
	if err := r.Raft().LeadershipTransferToServer(c.Server(down, 0).ID, c.Server(down, 0).Address).Error(); err == nil {
		t.Fatal("leadership moved to a seeding replica")
	}
	celltest.WaitFor(t, waitLong, "two segments copied", func() bool { return c.Seeder(down).Copied() >= 20<<10 })
	c.StopBroker(down)
	copied := c.Seeder(down).Copied()

	c.SetSeedRate(0)
	c.StartBroker(down)
	checkSeeded(t, c, down, 4)
	kept := c.Seeder(down).Kept()
	if kept < 16<<10 || kept < copied-8<<10 {
		t.Fatalf("the resumed seed kept %d verified bytes, %d were copied before the restart", kept, copied)
	}
	t.Logf("seed interrupted after %d bytes; resumed keeping %d, copying %d more", copied, kept, c.Seeder(down).Copied())

	produceKiB(t, c, 20)
	r = c.Replica(down, 0)
	celltest.WaitFor(t, waitLong, "the seeded replica to take new entries", func() bool {
		return r.HighWatermark() == c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark()
	})
	lead = c.Replica(c.WaitLeader(0, waitLong), 0)
	from := lead.LogStartOffset()
	want := fetchAll(t, lead, from)
	// The seeded replica is not the preferred one: leading, it would hand
	// leadership back after three check intervals, under the reads and
	// the produce below (one run in about eight failed so under load).
	r.SetTransfer(func(raft.ServerID, raft.ServerAddress) raft.Future {
		return errFuture{errors.New("the test keeps leadership on the seeded replica")}
	})
	if err := lead.Raft().LeadershipTransferToServer(c.Server(down, 0).ID, c.Server(down, 0).Address).Error(); err != nil {
		t.Fatalf("leadership to the seeded replica: %v", err)
	}
	celltest.WaitFor(t, waitLong, "the seeded replica to lead", func() bool { return r.IsLeader() })
	if got := fetchAll(t, r, from); !bytes.Equal(got, want) {
		t.Fatalf("the seeded leader serves %d bytes from %d, the old leader served %d, not the same", len(got), from, len(want))
	}
	produceKiB(t, c, 3)
}

// TestNewReplicaSeeded: a replica added to a group (AddVoter, and a
// non-voter likewise) after retention moved the log start has an empty
// store the leader cannot catch up by AppendEntries; it is seeded from the
// leader's segments the same way.
func TestNewReplicaSeeded(t *testing.T) {
	for _, voter := range []bool{true, false} {
		t.Run(fmt.Sprintf("voter=%v", voter), func(t *testing.T) {
			c := celltest.New(t, celltest.Options{Brokers: 4, Voters: 3, Stopped: []int{3}, Log: seedLog})
			c.WaitLeader(0, waitLong)
			produceKiB(t, c, 200)
			lead := retainUntil(t, c, 0)
			c.StartBroker(3)
			s := c.Server(3, 0)
			add := lead.Raft().AddNonvoter
			if voter {
				add = lead.Raft().AddVoter
			}
			if err := add(s.ID, s.Address, 0, waitLong).Error(); err != nil {
				t.Fatalf("add replica: %v", err)
			}
			checkSeeded(t, c, 3, 4)
			if c.Seeder(3).Copied() == 0 {
				t.Fatal("the new replica copied no segment bytes")
			}
			produceKiB(t, c, 5)
			r := c.Replica(3, 0)
			celltest.WaitFor(t, waitLong, "the new replica to take new entries", func() bool {
				return r.HighWatermark() == c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark()
			})
		})
	}
}

// TestNonMemberRefusedSegments: a broker of the cell that is not in the
// group asking the leader for its segments is refused (the members' copies
// in the tests above are admitted).
func TestNonMemberRefusedSegments(t *testing.T) {
	c := celltest.New(t, celltest.Options{Brokers: 4, Voters: 3, Stopped: []int{3}, Log: seedLog})
	lb := c.WaitLeader(0, waitLong)
	produceKiB(t, c, 20)
	outsider, err := c.Network().(*celltest.TransportNetwork).Node(3).Group("p0")
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close()
	lead := c.Server(lb, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := outsider.SegmentList(ctx, lead.ID, lead.Address, 0, 10); !errors.Is(err, transport.ErrRefused) {
		t.Fatalf("segment list from a non-member: %v, want ErrRefused", err)
	}
	if _, err := outsider.SegmentRead(ctx, lead.ID, lead.Address, 0, 0, 100, make([]byte, 100)); !errors.Is(err, transport.ErrRefused) {
		t.Fatalf("segment read from a non-member: %v, want ErrRefused", err)
	}
}

// TestFollowerSeededAfterTimeRetention: a follower stopped for longer than
// a retention of two seconds (a test clock moves three) finds every closed
// segment gone on the leader; it is seeded with the part of the active
// segment below the high watermark, reopens seeded after a restart, and
// then takes new entries into it.
func TestFollowerSeededAfterTimeRetention(t *testing.T) {
	var mu sync.Mutex
	now := time.UnixMilli(0).Add(time.Second) // the test batches carry timestamp 0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := celltest.New(t, celltest.Options{Log: log.Config{SegmentBytes: 8 << 10, RetentionAge: 2 * time.Second, Now: clock}})
	down := stopAppliedFollower(t, c)
	produceKiB(t, c, 60)
	mu.Lock()
	now = now.Add(3 * time.Second)
	mu.Unlock()
	lead := retainUntil(t, c, 10)
	if n := len(lead.Store().Log().Segments()); n != 1 {
		t.Fatalf("the leader keeps %d segments after the retention, want the active one", n)
	}
	c.StartBroker(down)
	checkSeeded(t, c, down, 0)
	if c.Seeder(down).Copied() == 0 {
		t.Fatal("the follower caught up without copying segment bytes")
	}
	t.Logf("seeded %d bytes: log start %d, high watermark %d", c.Seeder(down).Copied(), lead.LogStartOffset(), lead.HighWatermark())
	// Restarted before any entry followed the seed, it opens seeded (no
	// copy again) and is at the high watermark at once.
	c.StopBroker(down)
	c.StartBroker(down)
	if r := c.Replica(down, 0); r.Seeding() || r.HighWatermark() != lead.HighWatermark() {
		t.Fatalf("reopened seeded replica: seeding %v, high watermark %d, want %d", r.Seeding(), r.HighWatermark(), lead.HighWatermark())
	}
	if n := c.Seeder(down).Copied(); n != 0 {
		t.Fatalf("the reopened seeded replica copied %d bytes again", n)
	}
	produceKiB(t, c, 5)
	r := c.Replica(down, 0)
	celltest.WaitFor(t, waitLong, "the seeded replica to take new entries", func() bool {
		return r.HighWatermark() == c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark()
	})
	lead = c.Replica(c.WaitLeader(0, waitLong), 0)
	sameBytes(t, r, lead, lead.LogStartOffset(), lead.HighWatermark())
}
