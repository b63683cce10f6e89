package partition_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// idemBatch is a batch of n records from producer pid at epoch, starting
// at sequence seq, as an idempotent client sends it.
func idemBatch(pid int64, epoch int16, seq int32, n int) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, int(seq)+i)
	}
	return celltest.IdempotentBatch(pid, epoch, seq, vals...)
}

// produceTo sends to part's current leader, retrying only while no leader
// serves or it refused before appending.
func produceTo(t *testing.T, c *celltest.Cell, b []byte) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	return c.Produce(ctx, 0, b)
}

func mustProduce(t *testing.T, c *celltest.Cell, b []byte, want int64) {
	t.Helper()
	off, err := produceTo(t, c, b)
	if err != nil || off != want {
		t.Fatalf("produce: offset %d, %v; want offset %d", off, err, want)
	}
}

func TestIdempotentProducer(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	const pid = 7000

	// An unknown producer may start at any sequence.
	mustProduce(t, c, idemBatch(pid, 0, 40, 2), 0) // seq 40-41, offsets 0-1
	for i := 0; i < 6; i++ {                       // seq 42.., 2 records each
		mustProduce(t, c, idemBatch(pid, 0, int32(42+2*i), 2), int64(2+2*i))
	}
	// Offsets 0..13 used. The last five batches are deduplicated to their
	// original offsets; nothing is appended.
	for i := 1; i < 6; i++ {
		mustProduce(t, c, idemBatch(pid, 0, int32(42+2*i), 2), int64(2+2*i))
	}
	if hw := c.Replica(lb, 0).HighWatermark(); hw != 14 {
		t.Fatalf("hw %d after duplicates, want 14", hw)
	}
	// Older than the window: out of order, not silently accepted.
	if _, err := produceTo(t, c, idemBatch(pid, 0, 42, 2)); !errors.Is(err, partition.ErrOutOfOrderSequence) || !catalog.Has(err, catalog.OutOfOrderSequence) {
		t.Fatalf("batch behind the window: %v", err)
	}
	// A gap.
	if _, err := produceTo(t, c, idemBatch(pid, 0, 60, 1)); !errors.Is(err, partition.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v", err)
	}
	// A new epoch must start at 0; then the old epoch is fenced.
	if _, err := produceTo(t, c, idemBatch(pid, 1, 5, 1)); !errors.Is(err, partition.ErrOutOfOrderSequence) {
		t.Fatalf("new epoch at sequence 5: %v", err)
	}
	mustProduce(t, c, idemBatch(pid, 1, 0, 1), 14)
	if _, err := produceTo(t, c, idemBatch(pid, 0, 54, 1)); !errors.Is(err, partition.ErrInvalidProducerEpoch) || !catalog.Has(err, catalog.InvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// Another producer id is independent.
	mustProduce(t, c, idemBatch(pid+1, 0, 0, 1), 15)

	// Concurrent retries of one batch while it is in flight: exactly one
	// append, every caller gets its offset.
	b := idemBatch(pid, 1, 1, 3)
	var wg sync.WaitGroup
	offs := make([]int64, 8)
	errs := make([]error, 8)
	for i := range offs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs[i], errs[i] = produceTo(t, c, append([]byte(nil), b...))
		}()
	}
	wg.Wait()
	for i := range offs {
		if errs[i] != nil || offs[i] != 16 {
			t.Fatalf("concurrent retry %d: offset %d, %v", i, offs[i], errs[i])
		}
	}
	waitHighWatermark(t, c, 19, "every replica to apply everything")

	// Followers rebuilt the same state; it survives the leader's loss.
	want, _ := c.Replica(lb, 0).Producer(pid)
	for b := 0; b < 3; b++ {
		got, ok := c.Replica(b, 0).Producer(pid)
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("broker %d producer state %+v, leader's %+v", b, got, want)
		}
	}
	c.StopBroker(lb)
	nl := c.WaitLeader(0, waitLong)
	if nl == lb {
		t.Fatalf("broker %d still leads after it stopped", lb)
	}
	mustProduce(t, c, idemBatch(pid, 1, 1, 3), 16) // a duplicate at the new leader
	if _, err := produceTo(t, c, idemBatch(pid, 0, 56, 1)); !errors.Is(err, partition.ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after failover: %v", err)
	}
	mustProduce(t, c, idemBatch(pid, 1, 4, 1), 19)

	// And a restart of the whole cell from disk (snapshot plus replay).
	c.StartBroker(lb)
	for b := 0; b < 3; b++ {
		c.StopBroker(b)
	}
	for b := 0; b < 3; b++ {
		c.StartBroker(b)
	}
	c.WaitLeader(0, waitLong)
	mustProduce(t, c, idemBatch(pid, 1, 4, 1), 19)
	mustProduce(t, c, idemBatch(pid+1, 0, 0, 1), 15)
	mustProduce(t, c, idemBatch(pid, 1, 5, 1), 20)
}

// Snapshots carry producer state: with a low snapshot threshold a
// restarted replica restores it from the snapshot, not only from replay.
func TestProducerStateInSnapshot(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lb := c.WaitLeader(0, waitLong)
	const pid = 9
	mustProduce(t, c, idemBatch(pid, 3, 0, 2), 0)
	r := c.Replica(lb, 0)
	if err := r.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	c.StopBroker(lb)
	c.StartBroker(lb)
	celltest.WaitFor(t, waitLong, "the restarted replica to know the producer", func() bool {
		r := c.Replica(lb, 0)
		st, ok := r.Producer(pid)
		return ok && st.Epoch == 3 && len(st.Batches) == 1 && st.Batches[0].BaseOffset == 0
	})
}

// Producer ids beyond the bound evict the one written least recently, on
// every replica alike.
func TestProducerBound(t *testing.T) {
	t.Cleanup(partition.SetMaxProducers(3)) // restored after the cell closes
	c := celltest.New(t, celltest.Options{})
	c.WaitLeader(0, waitLong)
	for pid := int64(1); pid <= 4; pid++ {
		mustProduce(t, c, idemBatch(pid, 0, 0, 1), pid-1)
	}
	waitHighWatermark(t, c, 4, "every replica to apply everything")
	for b := 0; b < 3; b++ {
		if _, ok := c.Replica(b, 0).Producer(1); ok {
			t.Fatalf("broker %d still remembers producer 1", b)
		}
		for pid := int64(2); pid <= 4; pid++ {
			if _, ok := c.Replica(b, 0).Producer(pid); !ok {
				t.Fatalf("broker %d forgot producer %d", b, pid)
			}
		}
	}
	// Forgotten: any sequence is accepted. Remembered: a gap is not.
	mustProduce(t, c, idemBatch(1, 0, 9, 1), 4)
	if _, err := produceTo(t, c, idemBatch(3, 0, 9, 1)); !errors.Is(err, partition.ErrOutOfOrderSequence) {
		t.Fatalf("gap for a remembered producer: %v", err)
	}
}
