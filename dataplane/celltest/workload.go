package celltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// Serving is what a Workload drives: partitions numbered from 0, each led
// by one of a set of brokers' replicas. *Cell is one; a test with its own
// brokers (replica managers, say) can be another.
type Serving interface {
	Partitions() int
	// Brokers is the number of brokers, numbered from 0.
	Brokers() int
	// Leader is the broker whose replica of part serves as leader now,
	// or -1.
	Leader(part int) int
	// Replica is broker b's replica of part, or nil.
	Replica(b, part int) *partition.Replica
	// Produce sends batch to part's leader as Cell.Produce does.
	Produce(ctx context.Context, part int, batch []byte) (int64, error)
}

// Workload runs producers and readers on every partition of a cell and
// records what they observe in a Checker.
type Workload struct {
	c    Serving
	chk  *Checker
	stop chan struct{}
	wg   sync.WaitGroup
	acks atomic.Int64
	read atomic.Int64

	// gapMu guards the fields below: the longest time between two
	// acknowledgements since ResetAckGap.
	gapMu   sync.Mutex
	lastAck time.Time
	maxGap  time.Duration
}

// StartWorkload starts producers and readers goroutines per partition.
// Every produced value is unique; producers never resend a value.
func StartWorkload(c Serving, chk *Checker, producers, readers int) *Workload {
	w := &Workload{c: c, chk: chk, stop: make(chan struct{}), lastAck: time.Now()}
	for p := 0; p < c.Partitions(); p++ {
		for i := 0; i < producers; i++ {
			w.wg.Add(1)
			go w.produce(p, i)
		}
		for i := 0; i < readers; i++ {
			w.wg.Add(1)
			go w.readLoop(p, fmt.Sprintf("r%d", i))
		}
	}
	return w
}

// Acks is the number of acknowledged produces so far.
func (w *Workload) Acks() int64 { return w.acks.Load() }

// ResetAckGap starts measuring MaxAckGap afresh from now.
func (w *Workload) ResetAckGap() {
	w.gapMu.Lock()
	w.lastAck, w.maxGap = time.Now(), 0
	w.gapMu.Unlock()
}

// MaxAckGap is the longest time without any acknowledged produce since
// the workload started or ResetAckGap, the current gap included.
func (w *Workload) MaxAckGap() time.Duration {
	w.gapMu.Lock()
	defer w.gapMu.Unlock()
	return max(w.maxGap, time.Since(w.lastAck))
}

func (w *Workload) noteAck() {
	now := time.Now()
	w.gapMu.Lock()
	w.maxGap = max(w.maxGap, now.Sub(w.lastAck))
	w.lastAck = now
	w.gapMu.Unlock()
}

// Reads is the number of non-empty fetches so far.
func (w *Workload) Reads() int64 { return w.read.Load() }

// Stop stops the workload and waits for its goroutines.
func (w *Workload) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

func (w *Workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *Workload) produce(part, id int) {
	defer w.wg.Done()
	for i := 0; !w.stopped(); i++ {
		n := 1 + i%3
		values := make([]string, n)
		raw := make([][]byte, n)
		for k := range values {
			values[k] = fmt.Sprintf("p%d-w%d-%d-%d", part, id, i, k)
			raw[k] = []byte(values[k])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		base, err := w.c.Produce(ctx, part, Batch(raw...))
		cancel()
		switch {
		case err == nil:
			w.chk.Acked(part, values, base)
			w.acks.Add(1)
			w.noteAck()
		case definitelyNotWritten(err):
			w.chk.Failed(part, values)
		}
	}
}

// definitelyNotWritten reports whether a produce error means the batch was
// never appended to any log.
func definitelyNotWritten(err error) bool {
	var nl *partition.NotLeaderError
	if !errors.As(err, &nl) {
		return false
	}
	return errors.Is(nl.Cause, raft.ErrNotLeader) || errors.Is(nl.Cause, raft.ErrLeadershipTransferInProgress)
}

func (w *Workload) readLoop(part int, reader string) {
	defer w.wg.Done()
	var pos int64
	epoch := int32(-1)
	for !w.stopped() {
		recs, hw, ep, ok := w.fetchOnce(part, epoch, pos)
		if ep > epoch {
			epoch = ep
		}
		if !ok && hw > pos {
			// Below the log start: on from there (hw carries it).
			w.chk.Skipped(part, reader, pos, hw)
			pos = hw
			continue
		}
		if !ok {
			_ = pause(context.Background())
			continue
		}
		w.chk.Read(part, reader, pos, recs, hw)
		if len(recs) > 0 {
			pos = recs[len(recs)-1].Offset + 1
			w.read.Add(1)
		} else {
			_ = pause(context.Background())
		}
	}
}

// fetchOnce fetches from part's current leader at epoch. ok is false if no
// leader served it.
func (w *Workload) fetchOnce(part int, epoch int32, pos int64) (recs []Record, hw int64, ep int32, ok bool) {
	b := w.c.Leader(part)
	if b < 0 {
		return nil, 0, epoch, false
	}
	r := w.c.Replica(b, part)
	if r == nil {
		return nil, 0, epoch, false
	}
	res, err := r.FetchEpoch(epoch, pos, 64<<10)
	if err != nil {
		if errors.Is(err, partition.ErrFencedLeaderEpoch) {
			return nil, 0, res.LeaderEpoch, false
		}
		if outOfRange(err) {
			// Where the log starts now, for the reader to move on to.
			return nil, r.LogStartOffset(), epoch, false
		}
		return nil, 0, epoch, false
	}
	b2, err := res.Slice.AppendTo(nil)
	res.Slice.Release()
	if err != nil {
		return nil, 0, epoch, false
	}
	all, err := Records(b2)
	if err != nil {
		w.chk.undecodable(part, pos, err)
		return nil, 0, epoch, false
	}
	for _, rec := range all {
		if rec.Offset >= pos {
			recs = append(recs, rec)
		}
	}
	return recs, res.HighWatermark, res.LeaderEpoch, true
}

// FinalRead waits until part's leader exposes at least every acknowledged
// record, then reads the whole partition from its log start and hands it
// to the checker. It fails t if that does not happen within timeout.
func FinalRead(t testing.TB, c Serving, chk *Checker, part int, timeout time.Duration) {
	t.Helper()
	want := chk.AckedEnd(part)
	var recs []Record
	var hw, start int64
	WaitFor(t, timeout, fmt.Sprintf("partition %d: a leader exposing every acknowledged record (high watermark ≥ %d) and a full read", part, want), func() bool {
		b := c.Leader(part)
		if b < 0 {
			return false
		}
		r := c.Replica(b, part)
		if r == nil {
			return false
		}
		recs, hw = nil, 0
		epoch := int32(-1)
		start = r.LogStartOffset()
		pos := start
		for {
			res, err := r.FetchEpoch(epoch, pos, 1<<20)
			if err != nil {
				return false
			}
			if epoch < 0 {
				epoch, hw = res.LeaderEpoch, res.HighWatermark
				if hw < want {
					res.Slice.Release()
					return false
				}
			}
			if res.Slice.Size == 0 {
				res.Slice.Release()
				break
			}
			buf, err := res.Slice.AppendTo(nil)
			res.Slice.Release()
			if err != nil {
				return false
			}
			rs, err := Records(buf)
			if err != nil {
				t.Fatalf("partition %d: undecodable final read at %d: %v", part, pos, err)
			}
			for _, rec := range rs {
				if rec.Offset >= pos && rec.Offset < hw {
					recs = append(recs, rec)
				}
			}
			pos = res.Slice.NextOffset
			if pos >= hw {
				break
			}
		}
		return true
	})
	chk.FinalFrom(part, start, recs, hw)
}
