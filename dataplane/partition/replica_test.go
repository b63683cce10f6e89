package partition_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

const waitLong = 15 * time.Second

// waitHighWatermark waits until every broker's replica of partition 0
// has applied up to high watermark hw.
func waitHighWatermark(t *testing.T, c *celltest.Cell, hw int64, what string) {
	t.Helper()
	celltest.WaitFor(t, waitLong, what, func() bool {
		for b := 0; b < c.Brokers(); b++ {
			if c.Replica(b, 0).HighWatermark() != hw {
				return false
			}
		}
		return true
	})
}

func produceN(t *testing.T, c *celltest.Cell, part, n int) []int64 {
	t.Helper()
	var offs []int64
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		off, err := c.Produce(ctx, part, celltest.Batch([]byte(fmt.Sprintf("v%d", i)), []byte("x")))
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		offs = append(offs, off)
	}
	return offs
}

func readAll(t *testing.T, r *partition.Replica) ([]celltest.Record, int64) {
	t.Helper()
	sl, hw, err := r.Fetch(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	b, err := sl.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := celltest.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	return recs, hw
}

// waitKnowsLeader waits until follower f has heard from leader: a
// replica learns the leader from its first append, which a majority of
// the others may not have waited for.
func waitKnowsLeader(t *testing.T, f *partition.Replica, leader raft.ServerID) {
	t.Helper()
	celltest.WaitFor(t, waitLong, "the follower to learn the leader", func() bool {
		id, _ := f.LeaderID()
		return id == leader
	})
}

// followerRefuses produces to a follower of partition 0 once it knows
// that broker lb leads, checks the follower refuses with a NotLeaderError
// naming lb, and returns the follower and the error.
func followerRefuses(t *testing.T, c *celltest.Cell, lb int) (*partition.Replica, error) {
	t.Helper()
	f := c.Replica((lb+1)%3, 0)
	waitKnowsLeader(t, f, celltest.BrokerID(lb))
	_, err := f.Produce(context.Background(), celltest.Batch([]byte("no")))
	var nl *partition.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != celltest.BrokerID(lb) {
		t.Fatalf("follower produce: %v", err)
	}
	return f, err
}

func TestProduceFetch(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	offs := produceN(t, c, 0, 10)
	for i, off := range offs {
		if off != int64(2*i) {
			t.Fatalf("batch %d at offset %d, want %d", i, off, 2*i)
		}
	}
	r := c.Replica(lb, 0)
	recs, hw := readAll(t, r)
	if hw != 20 || len(recs) != 20 {
		t.Fatalf("hw %d, %d records", hw, len(recs))
	}
	for i, rec := range recs {
		if rec.Offset != int64(i) || rec.LeaderEpoch != r.LeaderEpoch() {
			t.Fatalf("record %d: offset %d epoch %d (leader epoch %d)", i, rec.Offset, rec.LeaderEpoch, r.LeaderEpoch())
		}
	}
	if eps := r.Epochs(); len(eps) != 1 || eps[0].StartOffset != 0 {
		t.Fatalf("epochs %+v", eps)
	}
	// A follower refuses and names the leader.
	f, _ := followerRefuses(t, c, lb)
	if _, _, err := f.Fetch(0, 100); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("follower fetch: %v", err)
	}
	// Every replica holds the same bytes: the stamped offsets and epochs
	// come from the log prefix, not from the leader.
	celltest.WaitFor(t, waitLong, "followers to apply everything", func() bool {
		return c.Replica(0, 0).HighWatermark() == 20 && c.Replica(1, 0).HighWatermark() == 20 && c.Replica(2, 0).HighWatermark() == 20
	})
	// Bad input is refused before it reaches Raft.
	bad := celltest.Batch([]byte("x"))
	bad[30] ^= 1
	if _, err := r.Produce(context.Background(), bad); !errors.Is(err, log.ErrCorruptBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
}

func TestRestartFromDisk(t *testing.T) {
	c := celltest.New(t, celltest.Options{Partitions: 2})
	for p := 0; p < 2; p++ {
		c.WaitLeader(p, waitLong)
		produceN(t, c, p, 5)
	}
	for b := 0; b < 3; b++ {
		c.StopBroker(b)
	}
	for b := 0; b < 3; b++ {
		c.StartBroker(b)
	}
	for p := 0; p < 2; p++ {
		lb := c.WaitLeader(p, waitLong)
		recs, hw := readAll(t, c.Replica(lb, p))
		if hw != 10 || len(recs) != 10 {
			t.Fatalf("partition %d after restart: hw %d, %d records", p, hw, len(recs))
		}
		offs := produceN(t, c, p, 1)
		if offs[0] != 10 {
			t.Fatalf("partition %d: next offset %d", p, offs[0])
		}
	}
}

func TestPreferredLeaderReturns(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	celltest.WaitFor(t, waitLong, "broker 0 (preferred) to lead", func() bool { return c.Leader(0) == 0 })
	c.Network().Isolate(0)
	celltest.WaitFor(t, waitLong, "another broker to lead", func() bool { l := c.Leader(0); return l > 0 })
	produceN(t, c, 0, 3)
	c.Network().Heal()
	celltest.WaitFor(t, waitLong, "leadership back on broker 0", func() bool { return c.Leader(0) == 0 })
	recs, hw := readAll(t, c.Replica(0, 0))
	if hw != 6 || len(recs) != 6 {
		t.Fatalf("hw %d, %d records", hw, len(recs))
	}
}

// A new group's first leader is its preferred replica: the others hold no
// configuration until it reaches them, so they cannot campaign, and no
// leadership transfer (a client-visible leader change) follows.
func TestNewGroupElectsPreferredFirst(t *testing.T) {
	c := celltest.New(t, celltest.Options{Partitions: 3, BootstrapGrace: time.Hour})
	for p := 0; p < 3; p++ {
		if l := c.WaitLeader(p, waitLong); l != p {
			t.Fatalf("partition %d: first leader broker %d, want its preferred replica %d", p, l, p)
		}
	}
}

// A new group whose preferred replica is down elects another leader once
// the grace ends, and hands leadership to the preferred replica when it
// starts.
func TestNewGroupWithoutPreferredReplica(t *testing.T) {
	c := celltest.New(t, celltest.Options{Stopped: []int{0}})
	if l := c.WaitLeader(0, waitLong); l == 0 {
		t.Fatalf("stopped broker 0 leads")
	}
	produceN(t, c, 0, 3)
	c.StartBroker(0)
	celltest.WaitFor(t, waitLong, "leadership on the preferred broker 0", func() bool { return c.Leader(0) == 0 })
	produceN(t, c, 0, 1)
	recs, hw := readAll(t, c.Replica(0, 0))
	if hw != 8 || len(recs) != 8 {
		t.Fatalf("hw %d, %d records, want 8", hw, len(recs))
	}
}

func TestRemovedReplicaShutsDown(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	fb := (lb + 1) % 3
	// A new group's non-preferred replicas hold no configuration until the
	// leader reaches them; wait for that, so the removal is a change of it.
	celltest.WaitFor(t, waitLong, "the follower to hold the group's configuration", func() bool {
		cf := c.Replica(fb, 0).Raft().GetConfiguration()
		return cf.Error() == nil && len(cf.Configuration().Servers) == 3
	})
	if err := c.Replica(lb, 0).Raft().RemoveServer(celltest.BrokerID(fb), 0, 0).Error(); err != nil {
		t.Fatal(err)
	}
	// hashicorp/raft stops replicating to a removed server at once, so the
	// follower may or may not receive the configuration that drops it. If
	// it holds that configuration it must shut itself down; if it never
	// got it, it cannot tell, and the controller that removed it closes it
	// (dataplane/replicas does, when the cell state stops listing it).
	f := c.Replica(fb, 0)
	committed := c.Replica(lb, 0).Raft().CommitIndex()
	celltest.WaitFor(t, waitLong, "the leader to commit the removal", func() bool {
		return c.Replica(lb, 0).Raft().AppliedIndex() >= committed
	})
	deadline := time.Now().Add(3 * time.Second)
	for !f.Removed() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !f.Removed() {
		cf := f.Raft().GetConfiguration()
		if err := cf.Error(); err != nil {
			t.Fatal(err)
		}
		holdsRemoval := !slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool { return s.ID == celltest.BrokerID(fb) })
		if holdsRemoval {
			t.Fatal("the follower holds the configuration without itself but did not shut down")
		}
		t.Log("the removed follower never received its removal; closing it as the controller would")
		if err := f.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatal(err)
		}
		if _, err := f.Produce(context.Background(), celltest.Batch([]byte("x"))); err == nil {
			t.Fatal("produce on a closed replica succeeded")
		}
	} else if _, err := f.Produce(context.Background(), celltest.Batch([]byte("x"))); !errors.Is(err, partition.ErrRemoved) {
		t.Fatalf("produce on removed replica: %v", err)
	}
	produceN(t, c, 0, 2) // the remaining two still form a majority
}

func TestRemovedLeaderShutsDown(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	if err := c.Replica(lb, 0).Raft().RemoveServer(celltest.BrokerID(lb), 0, 0).Error(); err != nil {
		t.Fatal(err)
	}
	celltest.WaitFor(t, waitLong, "the removed leader to shut down", func() bool { return c.Replica(lb, 0).Removed() })
	celltest.WaitFor(t, waitLong, "a new leader among the other two", func() bool { l := c.Leader(0); return l >= 0 && l != lb })
	produceN(t, c, 0, 2)
}

// The leader validates a produced batch whole, once, before Raft takes it
// (the front doors check only its framing, and the stores of the leader
// do not hash it again): a bad CRC is refused there, nothing is appended
// on any replica, and a good batch after it lands at the next offset.
func TestProduceValidatesOnceBeforeRaft(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	r := c.Replica(lb, 0)
	bad := celltest.Batch([]byte("k"), []byte("v"))
	bad[len(bad)-1] ^= 0xff
	if _, err := r.Produce(context.Background(), bad); !errors.Is(err, log.ErrCorruptBatch) {
		t.Fatalf("produce with a bad CRC: %v, want ErrCorruptBatch", err)
	}
	off, err := r.Produce(context.Background(), celltest.Batch([]byte("ok")))
	if err != nil || off != 0 {
		t.Fatalf("produce after the refusal: offset %d, %v; want 0", off, err)
	}
	for b := range 3 {
		celltest.WaitFor(t, waitLong, "every replica to hold the one good record", func() bool {
			return c.Replica(b, 0).Store().Log().NextOffset() == 1
		})
	}
}
