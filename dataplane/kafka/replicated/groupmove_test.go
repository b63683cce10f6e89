package replicated

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// TestHeldGroupResumesFromImportedOffsets: a franz-go consumer group of
// a tenant moving to this cell joins while its groups are held and
// consumes nothing (its join is answered COORDINATOR_LOAD_IN_PROGRESS,
// which it retries); the source's offsets are imported; once the hold
// clears, the group starts at exactly the imported offsets and consumes
// everything after them once, nothing before them.
func TestHeldGroupResumesFromImportedOffsets(t *testing.T) {
	const (
		parts  = 2
		topic  = "orders"
		group  = "movers"
		n      = 400
		oparts = 3
	)
	c, tn := startReadyGroupCell(t, parts, topic, oparts)
	counts := produceN(t, c, tn, topic, parts, n)
	from := make([]int64, parts)
	var list []wire.CommittedOffset
	for p := range parts {
		from[p] = counts[p] / 2
		list = append(list, wire.CommittedOffset{Group: group, TopicID: c.topicID, Partition: p, Offset: from[p]})
	}
	moving := func(hold bool) []wire.Tenant {
		return []wire.Tenant{{ID: tn.Tenant.ID, Move: &wire.TenantMove{Role: wire.MoveDestination, Peer: "cell-0", HoldGroups: hold, GroupOffsets: list}}}
	}
	coords := func() []*groups.Coordinator {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Clone(c.coords)
	}
	setMoves := func(ts []wire.Tenant) {
		for _, co := range coords() {
			co.SetMoves(ts)
		}
	}
	setMoves(moving(true))

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	proc := newProcessed(counts)
	var below atomic.Int64
	held := &heldHook{}
	cl := c.client(t, tn, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond), kgo.WithHooks(held))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset < from[r.Partition] {
					below.Add(1)
				}
				proc.add(t, r)
			})
		}
	}()
	defer func() { cancel(); <-done; cl.Close() }()

	celltest.WaitFor(t, 60*time.Second, "every offsets partition to acknowledge the import", func() bool {
		var got []int
		for _, co := range coords() {
			for _, imp := range co.OffsetsImported() {
				if imp.TenantID == tn.Tenant.ID {
					got = append(got, imp.Partitions...)
				}
			}
		}
		slices.Sort(got)
		return slices.Equal(got, []int{0, 1, 2})
	})
	celltest.WaitFor(t, 60*time.Second, "the consumer to be told its group is held", func() bool { return held.n.Load() > 0 })
	if got := proc.total.Load(); got != 0 {
		t.Fatalf("a held group consumed %d records", got)
	}
	setMoves(moving(false))
	want := int64(0)
	for p := range parts {
		want += counts[p] - from[p]
	}
	celltest.WaitFor(t, 60*time.Second, "the group to consume everything after the imported offsets", func() bool {
		return proc.total.Load() >= want
	})
	if b, d, tot := below.Load(), proc.dups.Load(), proc.total.Load(); b != 0 || d != 0 || tot != want {
		t.Fatalf("after the release: %d records below the imported offsets, %d duplicates, %d distinct (want %d)", b, d, tot, want)
	}
	for p := range parts {
		for o := from[p]; o < counts[p]; o++ {
			if !proc.seen[p][o] {
				t.Fatalf("partition %d offset %d not consumed", p, o)
			}
		}
	}
}

// heldHook counts the group errors a client saw that say the coordinator
// is loading, as a held group's are.
type heldHook struct{ n atomic.Int64 }

func (h *heldHook) OnGroupManageError(err error) {
	if errors.Is(err, kerr.CoordinatorLoadInProgress) {
		h.n.Add(1)
	}
}
