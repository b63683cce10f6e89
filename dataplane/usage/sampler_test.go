package usage

import (
	"context"
	"sync"
	"testing"
	"time"
)

// threePartitions is a Sampler of three partitions of 1,000,000 bytes
// each (tenant t1, topic tp) on a clock the test moves, with its Meter and
// the log that Meter flushes to; it samples only when told.
type threePartitions struct {
	mu    sync.Mutex
	start time.Time
	now   time.Time // guarded by mu
	m     *Meter
	l     *memLog
	s     *Sampler
}

func newThreePartitions(t *testing.T) *threePartitions {
	t.Helper()
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	ts := &threePartitions{start: start, now: start, l: &memLog{}}
	clock := func() time.Time { ts.mu.Lock(); defer ts.mu.Unlock(); return ts.now }
	ts.m = NewMeter(clock)
	newTestFlusher(t, ts.l, ts.m)
	s, err := NewSampler(SamplerConfig{Meter: ts.m, Interval: time.Hour * 1000, Now: clock, Led: func() []Sample {
		return []Sample{{"t1", "tp", 1_000_000}, {"t1", "tp", 1_000_000}, {"t1", "tp", 1_000_000}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts.s = s
	return ts
}

// sampleAfter moves the clock on by d and takes one sample.
func (ts *threePartitions) sampleAfter(d time.Duration) {
	ts.mu.Lock()
	ts.now = ts.now.Add(d)
	ts.mu.Unlock()
	ts.s.Sample()
}

// elapsed is how far the clock has moved since the start.
func (ts *threePartitions) elapsed() time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.now.Sub(ts.start)
}

// TestSamplerPartitionAndStorageSeconds: a topic of 3 partitions of
// 1,000,000 bytes each, led here for an hour sampled every 7.3 s (not
// whole seconds: the carried fractions must add up), meters 3 × 3,600
// partition-seconds and 3 × 10^6 × 3,600 byte-seconds, within 1%.
func TestSamplerPartitionAndStorageSeconds(t *testing.T) {
	ts := newThreePartitions(t)
	m, l, s := ts.m, ts.l, ts.s
	const every = 7300 * time.Millisecond
	for elapsed := time.Duration(0); elapsed < time.Hour; elapsed += every {
		ts.sampleAfter(min(every, time.Hour-elapsed))
	}
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := l.totals(t)
	for meter, want := range map[string]float64{"t1/tp/partition_seconds": 3 * 3600, "t1/tp/storage_byte_seconds": 3e6 * 3600} {
		if g := float64(got[meter]); g < want*0.99 || g > want*1.01 {
			t.Errorf("%s = %.0f, want %.0f ± 1%%", meter, g, want)
		}
	}
	_ = s.Close()
}

// TestSamplerExactAt100ms: sampled every 100.999 ms, an interval whose
// sub-millisecond part is nearly a whole millisecond, an hour of three
// partitions is counted to within a second (what the Meter carries below
// a whole second), not 1% short as whole milliseconds per sample were.
func TestSamplerExactAt100ms(t *testing.T) {
	ts := newThreePartitions(t)
	m, l, s := ts.m, ts.l, ts.s
	const every = 100*time.Millisecond + 999*time.Microsecond
	// The hour's samples, stopping short of its end so that every one
	// is billed in it.
	for elapsed := time.Duration(0); elapsed+every < time.Hour; elapsed += every {
		ts.sampleAfter(every)
	}
	held := ts.elapsed()
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := l.totals(t)
	for meter, want := range map[string]float64{"t1/tp/partition_seconds": 3 * held.Seconds(), "t1/tp/storage_byte_seconds": 3e6 * held.Seconds()} {
		// Below a second of each counter may stay in the Meter, and
		// below a millisecond in the sampler.
		slack := 1.01
		if meter == "t1/tp/storage_byte_seconds" {
			slack = 3e6 * 0.002
		}
		if g := float64(got[meter]); g > want || g < want-slack {
			t.Errorf("%s = %.0f, want %.0f (at most %.0f short)", meter, g, want, slack)
		}
	}
	_ = s.Close()
}
