package partition_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestCompactionCheckpointRestart: the cleaner's checkpoint is only an
// optimisation. Three replicas compact alike; every broker is restarted,
// one keeping its checkpoint, one having lost it, one with a corrupt one.
// The replica with its checkpoint skips the cleaning it had already done
// (nothing read or written); the other two clean again from the first
// segment; all three still hold byte-identical closed segments, equal to
// those before the restart, and again after new writes are compacted.
func TestCompactionCheckpointRestart(t *testing.T) {
	c := compactedCell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	const ts0 = 1_700_000_000_000
	val := make([]byte, 300)
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			copy(val, fmt.Sprintf("value %d", i))
			if _, err := produceRetrying(ctx, c, keyedBatch(ts0+int64(i), -1, 0, keyedRec{fmt.Sprintf("k%d", i%7), append([]byte(nil), val...)})); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			if i%25 == 0 {
				passAll(t, c, ts0+int64(i))
			}
		}
	}
	produce(0, 300)
	now := int64(ts0 + 1000)
	celltest.WaitFor(t, waitLong, "compacted alike", func() bool { return compactedAlike(t, c, now) })
	before := closedSums(t, c, 0)

	for b := range c.Brokers() {
		c.StopBroker(b)
	}
	ck := func(b int) string { return filepath.Join(c.Dir(b), "p0", "log", "clean-checkpoint") }
	for b := range c.Brokers() {
		if _, err := os.Stat(ck(b)); err != nil {
			t.Fatalf("broker %d has no cleaner checkpoint after compaction: %v", b, err)
		}
	}
	if err := os.Remove(ck(1)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck(2), []byte("v1\nend 12\nparams 1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for b := range c.Brokers() {
		c.StartBroker(b)
	}
	setSettings(t, c, compactSettings)
	celltest.WaitFor(t, waitLong, "compacted alike after the restart", func() bool { return compactedAlike(t, c, now) })
	for b := range c.Brokers() {
		if got := closedSums(t, c, b); !sameSums(got, before) {
			t.Fatalf("broker %d: closed segments changed across the restart", b)
		}
	}
	kept, lost, corrupt := c.Replica(0, 0).CompactionStats(), c.Replica(1, 0).CompactionStats(), c.Replica(2, 0).CompactionStats()
	t.Logf("after the restart: with checkpoint %+v\nlost %+v\ncorrupt %+v", kept, lost, corrupt)
	if kept.Skipped == 0 || kept.BytesRead >= lost.BytesRead || kept.BytesRead >= corrupt.BytesRead {
		t.Fatalf("the replica with its checkpoint skipped %d cleanings and read %d bytes; without, %d and %d: want it to skip and read less",
			kept.Skipped, kept.BytesRead, lost.BytesRead, corrupt.BytesRead)
	}
	if lost.Skipped != 0 || corrupt.Skipped != 0 {
		t.Fatalf("a replica without a usable checkpoint skipped a cleaning: lost %d, corrupt %d", lost.Skipped, corrupt.Skipped)
	}

	produce(300, 400)
	celltest.WaitFor(t, waitLong, "compacted alike after new writes", func() bool { return compactedAlike(t, c, now+2000) })
}
