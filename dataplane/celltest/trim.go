package celltest

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Trim makes the workload move each partition's log start while it runs,
// as retention and DeleteRecords do: every interval it asks the leader to
// delete the records below keep offsets under the high watermark
// (Replica.DeleteRecords, replicated through Raft), telling the checker
// first, and runs a retention pass on every running replica so that
// segments are deleted and Raft entries files checkpointed under faults.
// Stop ends it with the rest of the workload.
func (w *Workload) Trim(every time.Duration, keep int64) {
	for p := 0; p < w.c.Partitions(); p++ {
		w.wg.Add(1)
		go w.trimLoop(p, every, keep)
	}
}

func (w *Workload) trimLoop(part int, every time.Duration, keep int64) {
	defer w.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if b := w.c.Leader(part); b >= 0 {
			if r := w.c.Replica(b, part); r != nil {
				if to := r.HighWatermark() - keep; to > r.LogStartOffset() {
					w.chk.MayTrim(part, to)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, _ = r.DeleteRecords(ctx, to) // a failure leaves the outcome to the checker
					cancel()
				}
			}
		}
		for b := 0; b < w.c.Brokers(); b++ {
			if r := w.c.Replica(b, part); r != nil {
				_ = r.RetentionPass(context.Background(), 2*time.Second)
			}
		}
	}
}

// MayTrim records that the log start of part may be moved up to offset
// (history.Checker.MayTrim).
func (c *Checker) MayTrim(part int, offset int64) { c.h.MayTrim(int32(part), offset) }

// Skipped records that reader moved on from below the log start
// (history.Checker.Skipped).
func (c *Checker) Skipped(part int, reader string, from, to int64) {
	c.h.Skipped(reader, int32(part), from, to)
}

// FinalFrom is Final for a read from the log start, start.
func (c *Checker) FinalFrom(part int, start int64, recs []Record, hw int64) {
	c.h.FinalFrom(int32(part), start, records(part, recs), hw)
}

// outOfRange reports a fetch below the log start.
func outOfRange(err error) bool { return errors.Is(err, log.ErrOffsetOutOfRange) }
