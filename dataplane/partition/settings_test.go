package partition_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// TestSettingsBatchLimit: Produce refuses a batch above the replica's
// max.message.bytes with log.ErrBatchTooLarge and appends nothing; raising
// the limit on the running replicas lets the same batch commit on all of
// them, above the log's 1 MiB default; invalid settings change nothing.
func TestSettingsBatchLimit(t *testing.T) {
	c := celltest.New(t, celltest.Options{})
	lead := c.WaitLeader(0, waitLong)
	r := c.Replica(lead, 0)
	big := celltest.Batch([]byte("k"), bytes.Repeat([]byte("v"), 2<<20))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := r.Produce(ctx, append([]byte(nil), big...)); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("produce 2 MiB with the default limit: %v, want ErrBatchTooLarge", err)
	}
	if hw := r.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d after a refused batch", hw)
	}
	if err := r.SetSettings(partition.Settings{MaxBatchBytes: partition.MaxBatchCeiling + 1}); err == nil {
		t.Fatal("a limit above the ceiling was accepted")
	}
	if err := r.SetSettings(partition.Settings{Log: log.Settings{SegmentBytes: 1}}); err == nil {
		t.Fatal("a segment size of 1 byte was accepted")
	}
	if got := r.Settings().MaxBatchBytes; got != log.DefaultMaxBatchBytes {
		t.Fatalf("limit %d after refused settings", got)
	}
	setSettings(t, c, partition.Settings{MaxBatchBytes: 8 << 20, Log: log.Settings{SegmentAge: time.Hour}})
	if got := r.Settings(); got.MaxBatchBytes != 8<<20 || got.Log.SegmentAge != time.Hour || got.Log.SegmentBytes != log.DefaultSegmentBytes {
		t.Fatalf("settings %+v", got)
	}
	if _, err := r.Produce(ctx, append([]byte(nil), big...)); err != nil {
		t.Fatalf("produce 2 MiB with an 8 MiB limit: %v", err)
	}
	hw := r.HighWatermark()
	for b := range c.Brokers() {
		celltest.WaitFor(t, waitLong, "the batch on every replica", func() bool {
			return c.Replica(b, 0).HighWatermark() == hw
		})
	}
}
