package usage

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memLog is a usage partition in memory, failing on demand: failNext
// makes the next appends fail, some after appending (an outcome the
// flusher cannot know).
type memLog struct {
	mu       sync.Mutex
	batches  [][]byte
	failNext int
	appendOK bool // a failing append still appends
}

var errInjected = errors.New("injected append failure")

func (l *memLog) Produce(_ context.Context, b []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failNext > 0 {
		l.failNext--
		if l.appendOK {
			l.batches = append(l.batches, b)
		}
		return 0, errInjected
	}
	binary.BigEndian.PutUint64(b[0:], uint64(len(l.batches)))
	l.batches = append(l.batches, b)
	return int64(len(l.batches) - 1), nil
}

// totals folds the log the way the ledger does: each (node, boot, seq)
// once, and per (topic, partition, hour) the range with the highest end.
func (l *memLog) totals(t *testing.T) (map[string]int64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[[3]any]bool{}
	best := map[[3]any]Range{}
	out := map[string]int64{}
	dups := 0
	for _, b := range l.batches {
		if _, err := EachValue(b, func(_ int64, v []byte) error {
			r, err := Decode(v)
			if err != nil {
				return err
			}
			k := [3]any{r.Node, r.Boot, r.Seq}
			if seen[k] {
				dups++
				return nil
			}
			seen[k] = true
			for _, e := range r.Entries {
				out[e.Tenant+"/"+e.Topic+"/"+e.Meter] += e.Value
			}
			for _, g := range r.Ranges {
				if k := [3]any{g.Topic, g.Partition, g.Hour}; g.End > best[k].End {
					best[k] = g
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range best {
		out[g.Tenant+"/"+g.Topic+"/bytes_in"] += g.Bytes
		out[g.Tenant+"/"+g.Topic+"/messages_in"] += g.Messages
	}
	return out, dups
}

func newTestFlusher(t *testing.T, l *memLog, m *Meter) *Flusher {
	t.Helper()
	f, err := NewFlusher(FlusherConfig{NodeID: 1, Meter: m, Interval: time.Hour, RetryInterval: time.Millisecond,
		Partition: func() (Appender, bool) { return l, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestSyncCommitsBeforeReturn: after Sync returns, everything counted
// before it is in the log, counted once, also when appends fail, some of
// them after appending (the flusher retries with the same sequence and
// the duplicate is recognised).
func TestSyncCommitsBeforeReturn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     int
		appendOK bool
	}{
		{"no failures", 0, false},
		{"failures before appending", 3, false},
		{"failures after appending", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &memLog{failNext: tc.fail, appendOK: tc.appendOK}
			m := NewMeter(nil)
			newTestFlusher(t, l, m)
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := Range{Tenant: "t1", Topic: "topic-a", Partition: int32(i), End: 10, Hour: 3600, Bytes: int64(100 + i), Messages: 2}
					m.Produced(r)
					// Partition i's next leader records its
					// last range again: counted once.
					m.Produced(r)
					m.Fetched("t2", "", 10, 1)
					if err := m.Sync(context.Background()); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			got, dups := l.totals(t)
			want := map[string]int64{"t1/topic-a/bytes_in": 50*100 + 49*50/2, "t1/topic-a/messages_in": 100,
				"t2//bytes_out": 500, "t2//messages_out": 50}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %d, want %d", k, got[k], v)
				}
			}
			if len(got) != len(want) {
				t.Errorf("totals %v, want %v", got, want)
			}
			if tc.appendOK && dups == 0 {
				t.Errorf("no duplicate record in the log: the fault was not injected")
			}
			if m.Pending() {
				t.Errorf("counts still pending after every Sync returned")
			}
		})
	}
}

// TestSyncWaitsForAPartition: while the broker leads no usage partition,
// Sync does not return (the count is not durable) until ctx ends; the
// counts stay and reach the log once a partition is led.
func TestSyncWaitsForAPartition(t *testing.T) {
	l := &memLog{}
	var mu sync.Mutex
	leads := false
	m := NewMeter(nil)
	f, err := NewFlusher(FlusherConfig{NodeID: 1, Meter: m, Interval: time.Hour, RetryInterval: time.Millisecond,
		Partition: func() (Appender, bool) {
			mu.Lock()
			defer mu.Unlock()
			return l, leads
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m.Produced(Range{Tenant: "t1", Topic: "a", End: 1, Bytes: 10, Messages: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync = %v without a partition, want context.Canceled", err)
	}
	mu.Lock()
	leads = true
	mu.Unlock()
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := l.totals(t)
	if got["t1/a/bytes_in"] != 10 || got["t1/a/messages_in"] != 1 {
		t.Fatalf("totals %v", got)
	}
}

// TestHourBuckets: counts land in the hour of their Add.
func TestHourBuckets(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 59, 59, 0, time.UTC)
	var mu sync.Mutex
	m := NewMeter(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	l := &memLog{}
	newTestFlusher(t, l, m)
	m.Add("t", "a", BytesIn, 1)
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	m.Add("t", "a", BytesIn, 2)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	hours := map[int64]int64{}
	for _, b := range l.batches {
		_, _ = EachValue(b, func(_ int64, v []byte) error {
			r, _ := Decode(v)
			for _, e := range r.Entries {
				hours[e.Hour] += e.Value
			}
			return nil
		})
	}
	h10 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Unix()
	if hours[h10] != 1 || hours[h10+3600] != 2 || len(hours) != 2 {
		t.Fatalf("hours %v", hours)
	}
}

func BenchmarkMeterAdd(b *testing.B) {
	m := NewMeter(nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Fetched("tenant", "topic", 1000, 1)
		}
	})
}

// TestSyncWithoutUsagePartitions: on a broker with no usage partition at
// all, Sync does not wait; the counts are flushed once it has one.
func TestSyncWithoutUsagePartitions(t *testing.T) {
	l := &memLog{}
	var has atomic.Bool
	m := NewMeter(nil)
	m.WaitWhen(has.Load)
	f, err := NewFlusher(FlusherConfig{NodeID: 1, Meter: m, Interval: time.Hour, RetryInterval: time.Millisecond,
		Partition: func() (Appender, bool) { return l, has.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m.Produced(Range{Tenant: "t1", Topic: "a", End: 1, Bytes: 10, Messages: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Sync(ctx); err != nil {
		t.Fatalf("Sync without usage partitions: %v", err)
	}
	if !m.Pending() {
		t.Fatal("the count was dropped")
	}
	has.Store(true)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.totals(t); got["t1/a/bytes_in"] != 10 {
		t.Fatalf("totals %v", got)
	}
}
