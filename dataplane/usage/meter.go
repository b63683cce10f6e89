package usage

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// key is one counter: a tenant's meter on a topic in an hour.
type key struct {
	tenant, topic, meter string
	hour                 int64
}

// Meter holds a broker's counters between flushes. Its methods are safe
// for concurrent use; a nil *Meter counts nothing and Sync returns at
// once, so the front doors call it whether or not metering is on.
type Meter struct {
	now func() time.Time
	// durable, when set, says whether this broker has a usage partition
	// at all (a cell of fewer brokers than a usage partition's replicas
	// has none); without one Sync does not wait.
	durable atomic.Pointer[func() bool]

	// mu guards the fields below.
	mu     sync.Mutex
	counts map[key]int64
	// ranges are the produce ranges since the last take.
	ranges []Range
	// milli holds what addMilli counted below a whole unit, per counter
	// without its hour: carried into the next sample.
	milli map[key]int64
	// gen numbers the counts being accumulated; flushed is the newest
	// generation whose counts are committed in a usage partition, and
	// done is closed (and replaced) when flushed moves.
	gen, flushed uint64
	done         chan struct{}
	// want asks the flusher for a flush now (a Sync is waiting).
	want chan struct{}
}

// NewMeter returns a Meter; now is its clock (nil: time.Now).
func NewMeter(now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{now: now, counts: map[key]int64{}, milli: map[key]int64{}, gen: 1, done: make(chan struct{}), want: make(chan struct{}, 1)}
}

// WaitWhen makes Sync wait only while has reports that this broker has
// a usage partition to flush into (led or not): in a cell too small for
// usage partitions the counts stay in memory, flushed once it has one,
// and answers do not wait for them.
func (m *Meter) WaitWhen(has func() bool) { m.durable.Store(&has) }

// Add counts n of meter for tenant on topic (a topic id; "" for none) in
// the current hour.
func (m *Meter) Add(tenant, topic, meter string, n int64) {
	if m == nil || n <= 0 {
		return
	}
	hour := m.now().Truncate(time.Hour).Unix()
	m.mu.Lock()
	m.counts[key{tenant, topic, meter, hour}] += n
	m.mu.Unlock()
}

// addMilli counts n thousandths of a unit of meter, carrying the
// fraction below a whole unit to the next call.
func (m *Meter) addMilli(tenant, topic, meter string, n int64) {
	if m == nil || n <= 0 {
		return
	}
	hour := m.now().Truncate(time.Hour).Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, topic, meter, 0}
	total := m.milli[k] + n
	m.milli[k] = total % 1000
	if whole := total / 1000; whole > 0 {
		m.counts[key{tenant, topic, meter, hour}] += whole
	}
}

// Produced queues a partition's closed produce range for the next flush.
func (m *Meter) Produced(r Range) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.ranges = append(m.ranges, r)
	m.mu.Unlock()
}

// RecordRange is what a partition's leader calls with a closed range
// (partition.MeterSink, through an adapter that names the tenant, topic
// and partition): Produced, then Sync. An error leaves the outcome
// unknown; the leader records the range again later, and the ledger
// counts it once.
func (m *Meter) RecordRange(ctx context.Context, r Range) error {
	m.Produced(r)
	return m.Sync(ctx)
}

// Fetched counts fetched bytes holding messages records.
func (m *Meter) Fetched(tenant, topic string, bytes, messages int64) {
	m.Add(tenant, topic, BytesOut, bytes)
	m.Add(tenant, topic, MessagesOut, messages)
}

// Sync waits until everything counted before it was called is committed
// in a usage partition, or ctx ends (then it returns ctx's error and the
// counts stay queued: a later flush carries them).
func (m *Meter) Sync(ctx context.Context) error {
	if m == nil {
		return nil
	}
	if has := m.durable.Load(); has != nil && !(*has)() {
		return nil
	}
	m.mu.Lock()
	if len(m.counts) == 0 && len(m.ranges) == 0 && m.flushed+1 >= m.gen {
		// Nothing counted and no flush outstanding.
		m.mu.Unlock()
		return nil
	}
	// With nothing new counted, the flush in flight is the one to wait
	// for.
	gen := m.gen
	if len(m.counts) == 0 && len(m.ranges) == 0 {
		gen--
	}
	for m.flushed < gen {
		done := m.done
		m.mu.Unlock()
		select {
		case m.want <- struct{}{}:
		default:
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
	}
	m.mu.Unlock()
	return nil
}

// take returns the counts accumulated so far and their generation, and
// starts a new one.
func (m *Meter) take() (map[key]int64, []Range, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, b, g := m.counts, m.ranges, m.gen
	m.counts, m.ranges = map[key]int64{}, nil
	m.gen++
	return c, b, g
}

// markFlushed records that the counts of generations up to g are
// committed.
func (m *Meter) markFlushed(g uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g > m.flushed {
		m.flushed = g
		close(m.done)
		m.done = make(chan struct{})
	}
}

// Pending reports whether counts wait for a flush.
func (m *Meter) Pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.counts) > 0 || len(m.ranges) > 0 || m.flushed+1 < m.gen
}

// BatchShare is the bytes out of records [from, to) of a stored batch of
// n records and size bytes, when a front door delivers part of it (the
// HTTP API returns the records from the requested offset on): size*to/n
// - size*from/n, rounded down each. The shares of the pieces of a batch
// telescope, so a batch read in pieces bills its size exactly, as a
// Kafka fetch of the whole batch does. Bytes out, on either door, are the
// stored batch bytes of the records delivered.
func BatchShare(size int64, from, to, n int) int64 {
	if n <= 0 || from >= to {
		return 0
	}
	from, to = max(from, 0), min(to, n)
	return size*int64(to)/int64(n) - size*int64(from)/int64(n)
}
