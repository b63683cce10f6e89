package partition_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// rangeLog records the closed ranges the replicas' sinks get, by broker.
type rangeLog struct {
	mu  sync.Mutex
	got []recordedRange
	// lost lists brokers whose sink records a range and then reports a
	// failure (the answer was lost).
	lost map[int]bool
}

type recordedRange struct {
	broker int
	r      partition.MeterRange
}

type sinkFunc func(ctx context.Context, r partition.MeterRange) error

func (f sinkFunc) RecordRange(ctx context.Context, r partition.MeterRange) error { return f(ctx, r) }

var errAnswerLost = errors.New("recorded, answer lost")

func (l *rangeLog) sink(b, _ int) partition.MeterSink {
	return sinkFunc(func(_ context.Context, r partition.MeterRange) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, recordedRange{b, r})
		if l.lost[b] {
			return errAnswerLost
		}
		return nil
	})
}

// totals folds the recorded ranges as the billing ledger does: per hour
// the range with the highest end counts.
func (l *rangeLog) totals() (bytes, records int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := map[int64]partition.MeterRange{}
	for _, g := range l.got {
		if g.r.End > best[g.r.Hour].End {
			best[g.r.Hour] = g.r
		}
	}
	for _, r := range best {
		bytes += r.Bytes
		records += r.Records
	}
	return bytes, records
}

func (l *rangeLog) by(b int) []partition.MeterRange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []partition.MeterRange
	for _, g := range l.got {
		if g.broker == b {
			out = append(out, g.r)
		}
	}
	return out
}

func (l *rangeLog) has(b int, end int64) bool {
	for _, r := range l.by(b) {
		if r.End == end {
			return true
		}
	}
	return false
}

// produced counts what a test produced: bytes (whole batches) and records.
// Its batches come from one idempotent producer, so a batch whose outcome
// is unknown (its leader lost leadership while committing it, as happens
// on a busy machine when a broker stops) is sent again and lands once.
type produced struct {
	bytes, records int64
	pid            int64 // its producer id, taken at its first batch
	seq            int32
}

// meterPIDs hands each produced its own producer id.
var meterPIDs atomic.Int64

func init() { meterPIDs.Store(9090) }

func (p *produced) produce(t *testing.T, c *celltest.Cell, n int) {
	t.Helper()
	if p.pid == 0 {
		p.pid = meterPIDs.Add(1)
	}
	for i := 0; i < n; i++ {
		b := celltest.IdempotentBatch(p.pid, 0, p.seq, []byte(fmt.Sprintf("value-%d-%d", p.records, i)), []byte("x"))
		deadline := time.Now().Add(waitLong)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			_, err := c.Produce(ctx, 0, slices.Clone(b))
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, partition.ErrOutOfOrderSequence) || time.Now().After(deadline) {
				t.Fatalf("produce: %v", err)
			}
			t.Logf("produce of sequence %d: %v; sending it again", p.seq, err)
		}
		p.bytes += int64(len(b))
		p.records += 2
		p.seq += 2
	}
}

// waitAllClosed waits until every running replica has closed everything
// the leader's high watermark holds, and returns the leader's range.
func waitAllClosed(t *testing.T, c *celltest.Cell) partition.MeterRange {
	t.Helper()
	var want partition.MeterRange
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for b := 0; b < c.Brokers(); b++ {
			if r := c.Replica(b, 0); r != nil {
				got, pending := r.MeterClosed()
				t.Logf("broker %d: closed %+v pending %v high watermark %d leader %v", b, got, pending, r.HighWatermark(), r.IsLeader())
			}
		}
	})
	celltest.WaitFor(t, waitLong, "every replica to close the same range up to the high watermark", func() bool {
		lb := c.Leader(0)
		if lb < 0 {
			return false
		}
		l := c.Replica(lb, 0)
		closed, pending := l.MeterClosed()
		if pending || closed.End != l.HighWatermark() {
			return false
		}
		for b := 0; b < c.Brokers(); b++ {
			if r := c.Replica(b, 0); r != nil {
				if got, pending := r.MeterClosed(); pending || got != closed {
					return false
				}
			}
		}
		want = closed
		return true
	})
	return want
}

// TestMeterRangesAgreeOnEveryReplica: the closed produce ranges (end
// offset and sums) are the same on all three replicas, one restored from
// a snapshot and one that was leader when it was stopped included, and
// the ranges the leaders recorded, folded as the ledger folds them, hold
// exactly what was produced.
func TestMeterRangesAgreeOnEveryReplica(t *testing.T) {
	rl := &rangeLog{}
	c := celltest.New(t, celltest.Options{Meter: rl.sink, MeterInterval: 20 * time.Millisecond})
	var p produced
	lb := c.WaitLeader(0, waitLong)
	p.produce(t, c, 30)
	first := waitAllClosed(t, c)

	// A follower snapshots (its state, closed range included), more is
	// produced, and the leader is stopped while it leads.
	f := (lb + 1) % 3
	if err := c.Replica(f, 0).Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	p.produce(t, c, 10)
	c.StopBroker(lb)
	p.produce(t, c, 20)
	// The follower restarts from its snapshot and the entries after it;
	// the old leader comes back.
	c.StopBroker(f)
	c.StartBroker(f)
	c.StartBroker(lb)
	p.produce(t, c, 10)
	last := waitAllClosed(t, c)
	if last.End != p.records || last.End <= first.End {
		t.Fatalf("last range ends at %d (first at %d), want %d", last.End, first.End, p.records)
	}
	celltest.WaitFor(t, waitLong, "the last range to be recorded", func() bool {
		return rl.has(c.Leader(0), last.End)
	})
	if b, r := rl.totals(); b != p.bytes || r != p.records {
		t.Fatalf("recorded ranges hold %d bytes, %d records; produced %d bytes, %d records", b, r, p.bytes, p.records)
	}
}

// TestMeterRangeRecordedAgainAfterLeaderChange: a leader whose range's
// recording outcome is unknown appends no further close; the next leader
// records that range again before closing the rest, and the ranges,
// folded as the ledger folds them, count every batch once.
func TestMeterRangeRecordedAgainAfterLeaderChange(t *testing.T) {
	rl := &rangeLog{lost: map[int]bool{}}
	c := celltest.New(t, celltest.Options{Meter: rl.sink, MeterInterval: 20 * time.Millisecond})
	lb := c.WaitLeader(0, waitLong)
	rl.mu.Lock()
	rl.lost[lb] = true
	rl.mu.Unlock()
	var p produced
	p.produce(t, c, 10)
	celltest.WaitFor(t, waitLong, "the leader to try to record a range", func() bool { return len(rl.by(lb)) > 0 })
	closed := rl.by(lb)[0]
	// More produce: the leader does not close it, its last range not
	// known recorded.
	p.produce(t, c, 10)
	celltest.WaitFor(t, waitLong, "the leader to try its range again", func() bool { return len(rl.by(lb)) >= 3 })
	if got, pending := c.Replica(lb, 0).MeterClosed(); got != closed || !pending {
		t.Fatalf("leader closed %+v (pending %v) while its last range %+v was unrecorded", got, pending, closed)
	}
	for _, r := range rl.by(lb) {
		if r != closed {
			t.Fatalf("the failing leader recorded %+v, want only %+v", r, closed)
		}
	}
	c.StopBroker(lb)
	last := waitAllClosed(t, c)
	nb := c.Leader(0)
	celltest.WaitFor(t, waitLong, "the new leader to record its ranges", func() bool { return rl.has(nb, last.End) })
	if !rl.has(nb, closed.End) {
		t.Fatalf("the new leader did not record the old leader's last range %+v again: %+v", closed, rl.by(nb))
	}
	if b, r := rl.totals(); b != p.bytes || r != p.records {
		t.Fatalf("recorded ranges hold %d bytes, %d records; produced %d bytes, %d records", b, r, p.bytes, p.records)
	}
}
