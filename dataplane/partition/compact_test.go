package partition_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// keyedRec is one record of keyedBatch; a nil value is a tombstone.
type keyedRec struct {
	key   string
	value []byte
}

// keyedBatch is a client batch of keyed records with timestamps from ts,
// optionally idempotent (pid >= 0).
func keyedBatch(ts int64, pid int64, seq int32, recs ...keyedRec) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte(r.key), Value: r.value}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		body = rec.AppendTo(body)
	}
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(len(recs)-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body}
	if pid >= 0 {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, 0, seq
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crcTable))
	return out
}

// readRecord is a record read back: its offset, key and value (nil for a
// tombstone).
type readRecord struct {
	offset int64
	key    string
	value  string
	tomb   bool
}

// readCompacted fetches partition 0 from offset 0 to the high watermark through
// the leader and decodes every record.
func readCompacted(t *testing.T, r *partition.Replica) []readRecord {
	t.Helper()
	var out []readRecord
	for off := r.LogStartOffset(); ; {
		sl, hw, err := r.Fetch(off, 1<<20)
		if err != nil {
			t.Fatalf("fetch %d: %v", off, err)
		}
		if sl.Size == 0 {
			sl.Release()
			if off < hw {
				t.Fatalf("fetch %d below the high watermark %d returned nothing", off, hw)
			}
			return out
		}
		b, err := sl.AppendTo(nil)
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := celltest.KeyedRecords(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			out = append(out, readRecord{offset: rec.Offset, key: string(rec.Key), value: string(rec.Value), tomb: rec.Value == nil})
		}
		off = next
	}
}

// closedSums is the SHA-256 of each closed segment file of broker b's
// replica of partition 0, by name.
func closedSums(t *testing.T, c *celltest.Cell, b int) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(c.Dir(b), "p0", "log", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	out := map[string]string{}
	for _, n := range names[:max(len(names)-1, 0)] { // the last is the active segment
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		out[filepath.Base(n)] = hex.EncodeToString(s[:])
	}
	return out
}

func sameSums(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

var compactSettings = partition.Settings{
	MaxBatchBytes: log.DefaultMaxBatchBytes,
	// segment.ms is short so that the leader rolls the tail soon and all
	// of it gets compacted.
	Log:        log.Settings{SegmentBytes: 16 << 10, SegmentAge: 300 * time.Millisecond, RetentionAge: -1, Compacted: true},
	Compaction: partition.CompactionSettings{DeleteRetention: time.Hour, MinDirtyRatio: 0.2},
}

// compactedCell is a cell of three brokers whose partition 0 is compacted
// with compactSettings; it logs warnings and worse.
func compactedCell(t *testing.T) *celltest.Cell {
	t.Helper()
	c := celltest.New(t, celltest.Options{Log: log.Config{Compacted: true, SegmentBytes: 16 << 10}, Logger: celltest.Logger(t, slog.LevelWarn)})
	setSettings(t, c, compactSettings)
	return c
}

// setSettings gives every broker's replica of partition 0 settings s, as
// each broker does when it polls a cell state with the topic's config.
func setSettings(t testing.TB, c *celltest.Cell, s partition.Settings) {
	t.Helper()
	for b := range c.Brokers() {
		if err := c.Replica(b, 0).SetSettings(s); err != nil {
			t.Fatal(err)
		}
	}
}

// produceRetrying produces batch, again after a not-leader error whose
// outcome is unknown (a leadership change while committing): a duplicate
// of a keyed record is superseded by the retry, which is what compaction
// keeps, so these tests need no exactly-once. It retries until ctx ends,
// as a client does: a broker restarted a moment ago may lead before it
// has applied what its log says (a promotion, say) and refuses meanwhile
// with a retriable not-leader; eleven tries in a row, as before, ran out
// within that window on a loaded machine (TestPromotedMirrorCrash).
func produceRetrying(ctx context.Context, c *celltest.Cell, batch []byte) (int64, error) {
	for {
		off, err := c.Produce(ctx, 0, append([]byte(nil), batch...))
		var nl *partition.NotLeaderError
		// A broker crashed under the produce (CrashBroker) fails it with
		// its closed committer or Raft, as a client would see its
		// connection cut: that one is retried too.
		crashed := errors.Is(err, raftlog.ErrCommitterClosed) || errors.Is(err, raft.ErrRaftShutdown)
		if err == nil || !errors.As(err, &nl) && !crashed {
			return off, err
		}
		select {
		case <-ctx.Done():
			return off, err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// produceNewest produces recs in batch i (stamped ts0+i) and keeps in
// newest each key's latest record at its offset: what a reader from the
// log start must see once compaction has run.
func produceNewest(ctx context.Context, t *testing.T, c *celltest.Cell, newest map[string]readRecord, ts0 int64, i int, recs ...keyedRec) int64 {
	t.Helper()
	off, err := produceRetrying(ctx, c, keyedBatch(ts0+int64(i), -1, 0, recs...))
	if err != nil {
		t.Fatalf("produce %d: %v", i, err)
	}
	for j, r := range recs {
		newest[r.key] = readRecord{offset: off + int64(j), key: r.key, value: string(r.value), tomb: r.value == nil}
	}
	return off
}

// compactedAlike runs a compaction pass on every replica (passAll, now
// the leader's clock) and reports whether every broker's closed segments
// of partition 0 are byte-identical, the leader's log is closed up to its
// high watermark, and every replica has compacted up to it.
func compactedAlike(t *testing.T, c *celltest.Cell, now int64) bool {
	t.Helper()
	passAll(t, c, now)
	want := closedSums(t, c, 0)
	for b := 1; b < c.Brokers(); b++ {
		if !sameSums(want, closedSums(t, c, b)) {
			return false
		}
	}
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	if lead.Store().Log().ClosedEnd() < lead.HighWatermark() {
		return false
	}
	for b := range c.Brokers() {
		if upTo, ok := c.Replica(b, 0).CompactedTo(); !ok || upTo < lead.HighWatermark() {
			return false
		}
	}
	return true
}

// passAll runs a compaction pass on every running replica, the leader
// first, with now as the leader's clock.
//
// A leader that loses its leadership mid-pass (a transfer back to the
// preferred replica, say) answers not-leader, as the broker's cleaner loop
// would see and retry on its next pass: the pass starts again from the
// new leader, within waitLong.
func passAll(t *testing.T, c *celltest.Cell, now int64) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		err := passOnce(c, now)
		if err == nil {
			return
		}
		if !errors.Is(err, partition.ErrNotLeader) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

func passOnce(c *celltest.Cell, now int64) error {
	order := []int{c.WaitLeader(0, waitLong)}
	for b := range c.Brokers() {
		if b != order[0] {
			order = append(order, b)
		}
	}
	for _, b := range order {
		if r := c.Replica(b, 0); r != nil {
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			err := r.CompactionPass(ctx, time.UnixMilli(now), 0)
			cancel()
			if err != nil {
				return fmt.Errorf("compaction pass on broker %d: %w", b, err)
			}
		}
	}
	return nil
}

// TestCompactionIdenticalOnReplicas: a compacted partition on three
// replicas over the real transport, written with many updates of few keys
// (and an idempotent producer): after compaction all three hold closed
// segment files with equal SHA-256, a reader from offset 0 sees the newest
// value of every key at its original offset, the tombstone stays until
// delete.retention.ms after it (measured from the replicated "now") and
// then goes on every replica, a follower down while compaction went on
// catches up (from the Raft log, or seeded where the entries it lacks
// were compacted) and matches, and the producer's state survives (a retried
// batch is still recognised as a duplicate).
func TestCompactionIdenticalOnReplicas(t *testing.T) {
	c := compactedCell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	const ts0 = 1_700_000_000_000
	newest := map[string]readRecord{}
	produce := func(i int, recs ...keyedRec) int64 {
		t.Helper()
		return produceNewest(ctx, t, c, newest, ts0, i, recs...)
	}
	produce(0, keyedRec{"gone", []byte("soon deleted")})
	produce(1, keyedRec{key: "gone"}) // tombstone at ts0+1
	val := make([]byte, 300)
	for i := 2; i < 400; i++ {
		copy(val, fmt.Sprintf("value %d", i))
		produce(i, keyedRec{fmt.Sprintf("k%d", i%7), append([]byte(nil), val...)}, keyedRec{fmt.Sprintf("k%d", (i+3)%7), []byte(fmt.Sprint(i))})
		if i%20 == 0 {
			passAll(t, c, ts0+int64(i))
		}
	}
	// The idempotent producer's last batch, kept by compaction (its key is
	// written once).
	idem := keyedBatch(ts0+400, 7, 0, keyedRec{"idem", []byte("once")})
	idemOff, err := c.Produce(ctx, 0, append([]byte(nil), idem...))
	if err != nil {
		t.Fatal(err)
	}
	newest["idem"] = readRecord{offset: idemOff, key: "idem", value: "once"}

	converge := func(what string, now int64) {
		t.Helper()
		celltest.WaitFor(t, waitLong, what, func() bool { return compactedAlike(t, c, now) })
	}
	check := func(tombWanted bool) {
		t.Helper()
		lead := c.Replica(c.WaitLeader(0, waitLong), 0)
		got := readCompacted(t, lead)
		var want []readRecord
		for k, r := range newest {
			if k == "gone" && !tombWanted {
				continue
			}
			want = append(want, r)
		}
		sort.Slice(want, func(i, j int) bool { return want[i].offset < want[j].offset })
		if len(got) != len(want) {
			t.Fatalf("read %d records from offset 0, want %d (newest per key): %v", len(got), len(want), got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
			}
		}
	}
	now := int64(ts0 + 1000) // long before the tombstone's delete.retention.ms
	converge("compacted closed segments equal on every replica", now)
	check(true)
	for b := range c.Brokers() {
		if st := c.Replica(b, 0).CompactionStats(); st.Cleanings == 0 || st.BytesWritten == 0 {
			t.Fatalf("broker %d did not clean: %+v", b, st)
		}
	}

	// A follower restarted after compaction catches up and matches.
	f := (c.WaitLeader(0, waitLong) + 1) % c.Brokers()
	c.StopBroker(f)
	for i := 401; i < 500; i++ {
		produce(i, keyedRec{fmt.Sprintf("k%d", i%7), append([]byte(fmt.Sprint("late ", i)), val...)})
		if i%10 == 0 {
			passAll(t, c, now) // compaction goes on without it
		}
	}
	c.StartBroker(f)
	if err := c.Replica(f, 0).SetSettings(compactSettings); err != nil {
		t.Fatal(err)
	}
	converge("the restarted follower to match", now+2000)
	check(true)

	// After delete.retention.ms the tombstone goes, on every replica.
	now = ts0 + 1 + time.Hour.Milliseconds() + 5000
	converge("compaction past the tombstone's retention", now)
	check(false)

	// The producer state did not come from the compacted batches: a retry
	// of the idempotent batch after every broker restarted is a duplicate.
	for b := range c.Brokers() {
		c.StopBroker(b)
	}
	for b := range c.Brokers() {
		c.StartBroker(b)
	}
	hw := c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark()
	off, err := c.Produce(ctx, 0, append([]byte(nil), idem...))
	if err != nil || off != idemOff {
		t.Fatalf("retried idempotent batch: offset %d, %v; want the original %d", off, err, idemOff)
	}
	if got := c.Replica(c.WaitLeader(0, waitLong), 0).HighWatermark(); got != hw {
		t.Fatalf("the retry was appended: high watermark %d, was %d", got, hw)
	}
}

// TestNewReplicaSeededCompacted: a replica added to a compacted partition
// after compaction cannot be caught up from the Raft log (the batches of
// the compacted entries are gone or rewritten); it is seeded from the
// leader's segments as they are, and after its own cleaning pass its
// closed segment files equal the other three replicas'.
func TestNewReplicaSeededCompacted(t *testing.T) {
	c := celltest.New(t, celltest.Options{Brokers: 4, Voters: 3, Stopped: []int{3}, Log: log.Config{Compacted: true, SegmentBytes: 16 << 10}})
	for b := range 3 {
		if err := c.Replica(b, 0).SetSettings(compactSettings); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	const ts0 = 1_700_000_000_000
	for i := range 300 {
		if _, err := produceRetrying(ctx, c, keyedBatch(ts0+int64(i), -1, 0, keyedRec{fmt.Sprintf("k%d", i%5), make([]byte, 400)})); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			passAll(t, c, ts0+int64(i))
		}
	}
	converged := func(brokers int) func() bool {
		return func() bool {
			passAll(t, c, ts0+1000)
			want := closedSums(t, c, 0)
			for b := 1; b < brokers; b++ {
				if !sameSums(want, closedSums(t, c, b)) {
					return false
				}
			}
			lead := c.Replica(c.WaitLeader(0, waitLong), 0)
			for b := range brokers {
				if upTo, ok := c.Replica(b, 0).CompactedTo(); !ok || upTo < lead.Store().Log().ClosedEnd() || lead.Store().Log().ClosedEnd() < lead.HighWatermark() {
					return false
				}
			}
			return len(want) > 0
		}
	}
	celltest.WaitFor(t, waitLong, "three replicas compacted alike", converged(3))

	c.StartBroker(3)
	if err := c.Replica(3, 0).SetSettings(compactSettings); err != nil {
		t.Fatal(err)
	}
	s := c.Server(3, 0)
	lead := c.Replica(c.WaitLeader(0, waitLong), 0)
	if err := lead.Raft().AddVoter(s.ID, s.Address, 0, waitLong).Error(); err != nil {
		t.Fatalf("add replica: %v", err)
	}
	celltest.WaitFor(t, 2*waitLong, "the new replica seeded and compacted like the others", converged(4))
	if c.Seeder(3).Copied() == 0 {
		t.Fatal("the new replica copied no segment bytes: it was not seeded")
	}
	// New entries land in the same segments on all four.
	for i := 300; i < 400; i++ {
		if _, err := produceRetrying(ctx, c, keyedBatch(ts0+int64(i), -1, 0, keyedRec{fmt.Sprintf("k%d", i%5), make([]byte, 400)})); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			passAll(t, c, ts0+int64(i))
		}
	}
	celltest.WaitFor(t, 2*waitLong, "four replicas compacted alike after new entries", converged(4))
}
