package partition_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// TestCompactionTurnedOnIdenticalOnReplicas: a partition written while its
// topic deletes (not compacts), whose three replicas cut their segments
// at different offsets, has compaction turned on; a follower is down
// across the switch. After the leader's replicated roll and decision
// every replica re-cuts its closed segments at the leader's boundaries
// and cleans: the three replicas' closed segment files have equal
// SHA-256, the restarted follower's included, and a reader from the log
// start sees the newest value of every key at its original offset.
//
// A delete topic's replica rolls by its own clock (segment.ms) and
// applies a segment.bytes change when its broker polls the new cell
// state, so replicas' boundaries differ; here each replica gets its own
// segment size to make them differ on every run.
func TestCompactionTurnedOnIdenticalOnReplicas(t *testing.T) {
	c := celltest.New(t, celltest.Options{Log: log.Config{SegmentBytes: 16 << 10}, Logger: celltest.Logger(t, slog.LevelWarn)})
	for b := range c.Brokers() {
		s := partition.Settings{MaxBatchBytes: log.DefaultMaxBatchBytes,
			Log: log.Settings{SegmentBytes: int64(16+12*b) << 10, SegmentAge: time.Hour, RetentionAge: -1}}
		if err := c.Replica(b, 0).SetSettings(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	const ts0 = 1_700_000_000_000
	newest := map[string]readRecord{}
	val := make([]byte, 300)
	produce := func(i int, recs ...keyedRec) {
		t.Helper()
		produceNewest(ctx, t, c, newest, ts0, i, recs...)
	}
	update := func(i int) {
		copy(val, fmt.Sprintf("value %d", i))
		produce(i, keyedRec{fmt.Sprintf("k%d", i%11), append([]byte(nil), val...)}, keyedRec{fmt.Sprintf("k%d", (i+5)%11), []byte(fmt.Sprint(i))})
	}
	for i := range 400 {
		update(i)
	}
	lead := c.WaitLeader(0, waitLong)
	hw := c.Replica(lead, 0).HighWatermark()
	celltest.WaitFor(t, waitLong, "every replica to hold the batches", func() bool {
		for b := range c.Brokers() {
			if c.Replica(b, 0).Store().Log().NextOffset() < hw {
				return false
			}
		}
		return true
	})
	bases := map[int][]int64{}
	for b := range c.Brokers() {
		bases[b] = c.Replica(b, 0).Store().Log().Segments()
	}
	if slices.Equal(bases[0], bases[1]) || slices.Equal(bases[1], bases[2]) || slices.Equal(bases[0], bases[2]) {
		t.Fatalf("replicas' segment bases are not all different before the switch: %v", bases)
	}
	t.Logf("segment bases before the switch: %v", bases)

	// A follower is down across the switch.
	f := (lead + 1) % c.Brokers()
	c.StopBroker(f)
	for b := range c.Brokers() {
		if b != f {
			if err := c.Replica(b, 0).SetSettings(compactSettings); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := int64(ts0 + 1000)
	for i := 400; i < 500; i++ {
		update(i)
		if i%25 == 0 {
			passAll(t, c, now)
		}
	}
	c.StartBroker(f)
	if err := c.Replica(f, 0).SetSettings(compactSettings); err != nil {
		t.Fatal(err)
	}
	produce(500, keyedRec{"k0", []byte("last")})

	celltest.WaitFor(t, 2*waitLong, "closed segments equal on every replica after the re-cut and compaction", func() bool {
		return compactedAlike(t, c, now)
	})
	recut := 0
	for b := range c.Brokers() {
		st := c.Replica(b, 0).CompactionStats()
		t.Logf("broker %d: %+v, segments %v", b, st, c.Replica(b, 0).Store().Log().Segments())
		if st.Cleanings == 0 {
			t.Fatalf("broker %d did not clean: %+v", b, st)
		}
		if st.Recuts > 0 {
			recut++
		}
	}
	// The follower that stayed up re-cuts; the restarted one re-cuts too,
	// or is seeded from the leader's segments as they are.
	if recut == 0 {
		t.Fatal("no replica re-cut its segments")
	}
	got := readCompacted(t, c.Replica(c.WaitLeader(0, waitLong), 0))
	var want []readRecord
	for _, r := range newest {
		want = append(want, r)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].offset < want[j].offset })
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records from the log start, want the newest of each of %d keys: %v", len(got), len(want), got)
	}
}
