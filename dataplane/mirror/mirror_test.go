package mirror_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/mirror"
	"github.com/sluicehq/sluice/dataplane/partition"
)

const waitLong = 30 * time.Second

// move is a source cell and a destination cell in this process, the
// destination's replicas each with a puller over the source's partition 0.
type move struct {
	t        testing.TB
	src, dst *celltest.Cell
	source   mirror.ReplicaSource
	rate     int64
	maxBytes int // per pull

	// mu guards the field below.
	mu      sync.Mutex
	pullers map[int]*mirror.Puller // by destination broker
}

func newMove(t testing.TB, src, dst celltest.Options, rate int64) *move {
	t.Helper()
	dst.Mirror = true
	m := &move{t: t, src: celltest.New(t, src), dst: celltest.New(t, dst), rate: rate, maxBytes: 4 << 10, pullers: map[int]*mirror.Puller{}}
	m.source = mirror.ReplicaSource{Leader: func() *partition.Replica { return leaderOf(m.src) }}
	m.src.WaitLeader(0, waitLong)
	m.dst.WaitLeader(0, waitLong)
	// A destination refuses produce from the start, before any entry.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := m.dst.Produce(ctx, 0, celltest.Batch([]byte("early"))); !errors.Is(err, partition.ErrMirroring) {
		t.Fatalf("produce to a new mirror: %v, want ErrMirroring", err)
	}
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range m.pullers {
			p.Close()
		}
	})
	return m
}

// leaderOf is c's serving leader of partition 0, nil if none.
func leaderOf(c *celltest.Cell) *partition.Replica {
	if b := c.Leader(0); b >= 0 {
		return c.Replica(b, 0)
	}
	return nil
}

// fenceLeader fences the source partition on its leader, as often as a
// busy machine's leader changes make it (a fence is idempotent: a
// fenced partition answers its end again), and returns that leader and
// the fenced end.
func fenceLeader(t testing.TB, ctx context.Context, c *celltest.Cell) (*partition.Replica, int64) {
	t.Helper()
	var src *partition.Replica
	var end int64
	celltest.WaitFor(t, waitLong, "the source's fence", func() bool {
		if src = leaderOf(c); src == nil {
			return false
		}
		var err error
		end, err = src.Fence(ctx)
		var nl *partition.NotLeaderError
		if err != nil && !errors.As(err, &nl) {
			t.Fatalf("fence: %v", err)
		}
		return err == nil
	})
	return src, end
}

// startPullers starts a puller beside every running destination replica
// that has none.
func (m *move) startPullers() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for b := 0; b < m.dst.Brokers(); b++ {
		r := m.dst.Replica(b, 0)
		if r == nil || m.pullers[b] != nil {
			continue
		}
		p, err := mirror.Start(mirror.Config{Replica: r, Source: m.source, BytesPerSecond: m.rate, MaxBytes: m.maxBytes, Poll: 10 * time.Millisecond})
		if err != nil {
			m.t.Fatal(err)
		}
		m.pullers[b] = p
	}
}

// stopBroker stops destination broker b and its puller, as a process
// exit would.
func (m *move) stopBroker(b int) {
	m.mu.Lock()
	p := m.pullers[b]
	delete(m.pullers, b)
	m.mu.Unlock()
	if p != nil {
		p.Close()
	}
	m.dst.StopBroker(b)
}

// mirrored is the destination leader's high watermark, -1 without one.
func (m *move) mirrored() int64 {
	if r := leaderOf(m.dst); r != nil {
		return r.HighWatermark()
	}
	return -1
}

// waitMirrored waits until the destination leader's high watermark is
// at least off.
func (m *move) waitMirrored(off int64) {
	m.t.Helper()
	celltest.WaitFor(m.t, waitLong, fmt.Sprintf("the mirror to reach offset %d", off), func() bool { return m.mirrored() >= off })
}

// promote fences nothing: it waits for the destination to reach the
// fenced end and promotes it.
func (m *move) promote(end int64) *partition.Replica {
	m.t.Helper()
	m.waitMirrored(end)
	var dst *partition.Replica
	celltest.WaitFor(m.t, waitLong, "the mirror's promotion", func() bool {
		dst = leaderOf(m.dst)
		if dst == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := mirror.Promote(ctx, dst, m.source)
		if err != nil {
			m.t.Logf("promote: %v", err)
		}
		return err == nil
	})
	return dst
}

func ctxLong(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// raw is r's log from offset from up to its high watermark, as its
// batches lie.
func raw(t testing.TB, r *partition.Replica, from int64) []byte {
	t.Helper()
	var out []byte
	for off, hw := from, r.HighWatermark(); off < hw; {
		b, err := r.ReadRaw(off, 1<<20)
		if err != nil {
			t.Fatalf("read raw at %d: %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
		for len(b) > 0 {
			h, err := log.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			off, b = h.NextOffset(), b[h.Size():]
		}
	}
	return out
}

// sameLog fails unless the destination leader's log is the source
// leader's byte for byte, from the source's log start.
func (m *move) sameLog() {
	m.t.Helper()
	src, dst := leaderOf(m.src), leaderOf(m.dst)
	if src == nil || dst == nil {
		m.t.Fatal("no leader to compare")
	}
	if src.HighWatermark() != dst.HighWatermark() || src.LogStartOffset() != dst.LogStartOffset() {
		m.t.Fatalf("source holds [%d, %d), destination [%d, %d)", src.LogStartOffset(), src.HighWatermark(), dst.LogStartOffset(), dst.HighWatermark())
	}
	a, b := raw(m.t, src, src.LogStartOffset()), raw(m.t, dst, dst.LogStartOffset())
	if !bytes.Equal(a, b) {
		m.t.Fatalf("destination log differs from the source's: %d and %d bytes", len(a), len(b))
	}
}

// fill appends n batches to c's partition 0. A leader lost while it
// committed leaves the outcome unknown; the batch is sent again (a plain
// batch may then be there twice, which the mirror copies like any other).
func fill(t testing.TB, c *celltest.Cell, n int, batch func(i int) []byte) {
	t.Helper()
	ctx := ctxLong(t)
	for i := 0; i < n; i++ {
		if _, err := sendRetrying(ctx, c, batch(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// sendRetrying is c.Produce, sending again while the outcome is unknown
// because the leader was lost: what an idempotent client does.
func sendRetrying(ctx context.Context, c *celltest.Cell, b []byte) (int64, error) {
	for {
		off, err := c.Produce(ctx, 0, b)
		var nl *partition.NotLeaderError
		if err == nil || !errors.As(err, &nl) || ctx.Err() != nil {
			return off, err
		}
	}
}

func idem(pid int64, seq int32, n int) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = fmt.Appendf(nil, "p%d-s%d", pid, int(seq)+i)
	}
	return celltest.IdempotentBatch(pid, 0, seq, vals...)
}

// TestMirrorIdempotentProducerAcrossCutover: a partition under an
// idempotent producer is mirrored while it is written to, fenced, caught
// up and promoted; the destination holds every batch at its offset, byte
// for byte, and the producer goes on there: its next sequence is taken,
// a retry of its last batch is answered as a duplicate.
func TestMirrorIdempotentProducerAcrossCutover(t *testing.T) {
	m := newMove(t, celltest.Options{}, celltest.Options{}, 0)
	ctx := ctxLong(t)
	const pid = 7000
	seq := int32(0)
	var lastBase int64
	produce := func(c *celltest.Cell) error {
		b := idem(pid, seq, 2)
		base, err := sendRetrying(ctx, c, b)
		if err != nil {
			return err
		}
		lastBase, seq = base, seq+2
		return nil
	}
	for i := 0; i < 20; i++ {
		if err := produce(m.src); err != nil {
			t.Fatal(err)
		}
	}
	// Plain batches too, between the producer's.
	fill(t, m.src, 1, func(int) []byte { return celltest.Batch([]byte("plain")) })
	m.startPullers()

	// Written while mirrored, until the fence refuses it.
	fenced := make(chan error, 1)
	var started sync.WaitGroup
	started.Add(1)
	go func() {
		for i := 0; ; i++ {
			if i == 10 {
				started.Done()
			}
			if err := produce(m.src); err != nil {
				if i < 10 {
					started.Done()
				}
				fenced <- err
				return
			}
		}
	}()
	started.Wait()
	m.waitMirrored(41)
	src, end := fenceLeader(t, ctx, m.src)
	err := <-fenced
	if !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("produce after the fence: %v, want ErrFenced", err)
	}
	var ce *catalog.Error
	if !errors.As(err, &ce) || ce.Entry != catalog.NotLeader {
		t.Fatalf("produce after the fence: %v is not the catalogue's not_leader", err)
	}
	// The fenced end is after the producer's last batch: the last one
	// acknowledged, or the one after it if the fence refused the resend of
	// a batch whose outcome a lost leader had left unknown.
	if ps, ok := src.Producer(pid); !ok || len(ps.Batches) == 0 {
		t.Fatal("the source knows no state of the producer")
	} else if last := ps.Batches[len(ps.Batches)-1]; last.BaseOffset != lastBase {
		if last.FirstSeq != seq || last.BaseOffset <= lastBase {
			t.Fatalf("the source's last batch of the producer %+v; the last acknowledged was at %d", last, lastBase)
		}
		lastBase, seq = last.BaseOffset, seq+2
	}
	if lastBase+2 != end {
		t.Fatalf("fenced end %d; the producer's last batch is at %d", end, lastBase)
	}
	// Before promotion the mirror refuses produce.
	if _, err := leaderOf(m.dst).Produce(ctx, idem(pid, seq, 2)); !errors.Is(err, partition.ErrMirroring) {
		t.Fatalf("produce to the mirror before promotion: %v, want ErrMirroring", err)
	}
	dst := m.promote(end)
	m.sameLog()

	// The producer continues on the destination.
	retry, retrySeq := lastBase, seq-2
	if err := produce(m.dst); err != nil {
		t.Fatalf("produce the next sequence to the promoted mirror: %v", err)
	}
	if lastBase != end {
		t.Fatalf("next batch at %d, want the fenced end %d", lastBase, end)
	}
	base, err := m.dst.Produce(ctx, 0, idem(pid, retrySeq, 2))
	if err != nil || base != retry {
		t.Fatalf("retry of the batch at %d: %d, %v; want the duplicate's offset", retry, base, err)
	}
	if hw := dst.HighWatermark(); hw != end+2 {
		t.Fatalf("high watermark %d after the duplicate, want %d", hw, end+2)
	}
	if _, err := m.dst.Produce(ctx, 0, idem(pid, seq+4, 1)); !errors.Is(err, partition.ErrOutOfOrderSequence) {
		t.Fatalf("a sequence gap on the destination: %v, want ErrOutOfOrderSequence", err)
	}
	celltest.WaitFor(t, waitLong, "the pullers to stop after the promotion", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range m.pullers {
			if !p.Status().Promoted {
				return false
			}
		}
		return true
	})
}

// TestMirrorResumesAfterLeaderChanges: the destination's leader, then the
// source's, stop mid-mirror; the mirror goes on from the new leaders with
// no gap and no duplicate.
func TestMirrorResumesAfterLeaderChanges(t *testing.T) {
	m := newMove(t, celltest.Options{}, celltest.Options{}, 64<<10)
	ctx := ctxLong(t)
	fill(t, m.src, 300, func(i int) []byte { return celltest.Batch(bytes.Repeat([]byte{byte(i)}, 500)) })
	hw := leaderOf(m.src).HighWatermark()
	m.startPullers()
	m.waitMirrored(hw / 4)
	m.stopBroker(m.dst.WaitLeader(0, waitLong))
	if got := m.mirrored(); got >= hw {
		t.Fatalf("the mirror finished (%d of %d) before its leader stopped; slow it down", got, hw)
	}
	m.dst.WaitLeader(0, waitLong)
	m.waitMirrored(hw / 2)
	m.src.StopBroker(m.src.WaitLeader(0, waitLong))
	m.src.WaitLeader(0, waitLong)
	_, end := fenceLeader(t, ctx, m.src)
	m.promote(end)
	m.sameLog()
}

// TestMirrorTrimmedSource: a source whose log starts past 0 (retention
// deleted its head) mirrors with the same offsets; the destination's log
// starts there too and goes on at the source's end.
func TestMirrorTrimmedSource(t *testing.T) {
	m := newMove(t, celltest.Options{Log: log.Config{SegmentBytes: 4 << 10}}, celltest.Options{}, 0)
	ctx := ctxLong(t)
	fill(t, m.src, 100, func(i int) []byte { return celltest.Batch(bytes.Repeat([]byte{byte(i)}, 200)) })
	src := leaderOf(m.src)
	if _, err := src.DeleteRecords(ctx, 57); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < m.src.Brokers(); b++ {
		if _, err := m.src.Replica(b, 0).Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if start := src.Store().Log().LogStartOffset(); start == 0 {
		t.Fatal("the source's segments below its log start were not deleted")
	}
	m.startPullers()
	src, end := fenceLeader(t, ctx, m.src)
	dst := m.promote(end)
	if got := dst.LogStartOffset(); got != 57 {
		t.Fatalf("destination log start %d, want 57", got)
	}
	m.sameLog()
	if off, err := m.dst.Produce(ctx, 0, celltest.Batch([]byte("after"))); err != nil || off != end {
		t.Fatalf("produce after the promotion: %d, %v; want offset %d", off, err, end)
	}
}

// TestMirrorReplicasByteIdentical: the destination's three replicas hold
// segment files identical to each other's, byte for byte, rolls included.
func TestMirrorReplicasByteIdentical(t *testing.T) {
	small := celltest.Options{Log: log.Config{SegmentBytes: 8 << 10}}
	m := newMove(t, small, small, 0)
	ctx := ctxLong(t)
	fill(t, m.src, 200, func(i int) []byte { return celltest.Batch(bytes.Repeat([]byte{byte(i)}, 300), []byte("x")) })
	m.startPullers()
	_, end := fenceLeader(t, ctx, m.src)
	m.promote(end)
	celltest.WaitFor(t, waitLong, "every destination replica to apply the whole mirror", func() bool {
		for b := 0; b < m.dst.Brokers(); b++ {
			if m.dst.Replica(b, 0).HighWatermark() < end {
				return false
			}
		}
		return true
	})
	files := func(b int) map[string][]byte {
		dir := filepath.Join(m.dst.Dir(b), "p0", "log")
		names, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(n)] = b
		}
		return out
	}
	want := files(0)
	if len(want) < 2 {
		t.Fatalf("%d segment files; the test wants rolls", len(want))
	}
	for b := 1; b < m.dst.Brokers(); b++ {
		got := files(b)
		if len(got) != len(want) {
			t.Fatalf("replica %d has %d segment files, replica 0 %d", b, len(got), len(want))
		}
		for name, w := range want {
			if !bytes.Equal(got[name], w) {
				t.Fatalf("replica %d's %s differs from replica 0's", b, name)
			}
		}
	}
}

// TestFenceRollbackBeforePromote: a move rolled back after the fence and
// before the promotion: the source takes produce again after its old end,
// the mirror goes on past it, and a second fence and the promotion still
// leave the destination identical to the source.
func TestFenceRollbackBeforePromote(t *testing.T) {
	m := newMove(t, celltest.Options{}, celltest.Options{}, 0)
	ctx := ctxLong(t)
	fill(t, m.src, 30, func(int) []byte { return celltest.Batch([]byte("before")) })
	m.startPullers()
	src, end := fenceLeader(t, ctx, m.src)
	m.waitMirrored(end)
	if _, err := m.src.Produce(ctx, 0, celltest.Batch([]byte("fenced"))); !errors.Is(err, partition.ErrFenced) {
		t.Fatalf("produce to the fenced source: %v, want ErrFenced", err)
	}
	if err := src.Unfence(ctx); err != nil {
		t.Fatal(err)
	}
	if off, err := m.src.Produce(ctx, 0, celltest.Batch([]byte("after"))); err != nil || off != end {
		t.Fatalf("produce after the rollback: %d, %v; want offset %d", off, err, end)
	}
	if err := mirror.Promote(ctx, leaderOf(m.dst), m.source); !errors.Is(err, mirror.ErrNotFenced) {
		t.Fatalf("promote with the source unfenced: %v, want ErrNotFenced", err)
	}
	m.waitMirrored(end + 1)
	_, end2 := fenceLeader(t, ctx, m.src)
	if end2 != end+1 {
		t.Fatalf("second fence: end %d; want %d", end2, end+1)
	}
	m.promote(end2)
	m.sameLog()
}
