package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// Produce metering from the replicated log (DESIGN.md, "Metering from the
// log"). Every replica's FSM sums the bytes and records of the batches it
// applies; a ControlMeterClose entry, which the leader appends every
// MeterInterval while sums are pending, moves them into the partition's
// closed range. Both live in fsmState, so every replica, one restored
// from a snapshot or seeded included, has the same closed range at the
// same Raft index. The leader hands each closed range to its MeterSink
// and appends the next close only once the sink recorded the previous
// one, so at most the last closed range can be unrecorded; a replica
// that becomes leader records its last closed range again first. The
// sink's consumer (the billing ledger) drops the copies: a range is
// named by its end offset, which the log fixes.

// DefaultMeterInterval is how often a metered partition's leader closes
// its pending produce sums.
const DefaultMeterInterval = 2 * time.Second

// MeterRange is a closed range of a partition's produced batches: every
// batch below End (a Kafka offset: the high watermark at the close) and
// at or above the previous range's End. Its sums are cumulative over
// Hour: Bytes and Records are everything the partition's ranges
// attributed to Hour up to End, this range included. So of two ranges of
// one hour the later one holds the earlier one, and a consumer that keeps
// per (partition, hour) the range with the highest End counts each batch
// once, whatever order ranges reach it in.
type MeterRange struct {
	End int64 `json:"end"`
	// Hour is the start of the hour, unix seconds, in the leader's clock
	// when it appended the close; never earlier than the previous
	// range's Hour.
	Hour    int64 `json:"hour"`
	Bytes   int64 `json:"bytes"`
	Records int64 `json:"records"`
}

// MeterSink records a partition's closed ranges.
type MeterSink interface {
	// RecordRange returns once r is durably recorded (the same r
	// recorded again must count once), or with an error if it may not
	// be.
	RecordRange(ctx context.Context, r MeterRange) error
}

// meterState is the FSM's produce metering: what the data entries since
// the last close hold, and the last closed range (End 0: none yet).
type meterState struct {
	PendingBytes   int64      `json:"pending_bytes,omitempty"`
	PendingRecords int64      `json:"pending_records,omitempty"`
	Closed         MeterRange `json:"closed"`
	// FromLog is whether the pending sums are the log's since the
	// partition's first batch or since a start entry. A replica restored
	// from a snapshot a version that metered produce at its front doors
	// wrote (no "meter" in it) has false: the entries it applies again
	// after that snapshot were counted where they were produced, so its
	// leader starts metering (meterStart) instead of closing them.
	FromLog bool `json:"from_log"`
	// Term, TermBytes and TermRecords are the pending sums of the newest
	// leader epoch's batches: what a start keeps, as the batches its own
	// leader appended.
	Term        int32 `json:"term,omitempty"`
	TermBytes   int64 `json:"term_bytes,omitempty"`
	TermRecords int64 `json:"term_records,omitempty"`
}

// UnmarshalJSON reads a snapshot's meter state. A state without
// "from_log" was written by a version that metered from the log before
// the field existed: its sums are the log's.
func (m *meterState) UnmarshalJSON(b []byte) error {
	type plain meterState
	var p struct {
		plain
		FromLog *bool `json:"from_log"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = meterState(p.plain)
	m.FromLog = p.FromLog == nil || *p.FromLog
	return nil
}

// add counts an applied data batch of n bytes. Control batches
// (transaction markers, which the broker writes) are not produce.
func (m *meterState) add(h log.Header, n int) {
	if h.IsControl() {
		return
	}
	if h.BaseOffset == 0 {
		m.FromLog = true // the partition's first batch: these sums hold the whole log
	}
	if h.LeaderEpoch != m.Term {
		m.Term, m.TermBytes, m.TermRecords = h.LeaderEpoch, 0, 0
	}
	m.TermBytes += int64(n)
	m.TermRecords += int64(h.NumRecords)
	m.PendingBytes += int64(n)
	m.PendingRecords += int64(h.NumRecords)
}

// close moves the pending sums into a range ending at end, billed in the
// hour of atMillis (or the previous range's hour, if later). With nothing
// pending it closes no range: two closes in a row make one range. Only a
// leader metering from the log closes, so after a close so does this
// state.
func (m *meterState) close(end, atMillis int64) {
	m.FromLog = true
	if m.PendingBytes == 0 && m.PendingRecords == 0 {
		return
	}
	hour := atMillis / 1000
	hour -= hour % 3600
	c := MeterRange{End: end, Hour: max(hour, m.Closed.Hour), Bytes: m.PendingBytes, Records: m.PendingRecords}
	if c.Hour == m.Closed.Hour {
		c.Bytes += m.Closed.Bytes
		c.Records += m.Closed.Records
	}
	m.Closed = c
	m.PendingBytes, m.PendingRecords = 0, 0
	m.TermBytes, m.TermRecords = 0, 0
}

// start applies a start entry of leader epoch epoch: produce is metered
// from the log from here, and of the batches pending only that epoch's
// are kept (its leader, which appended them, meters produce from the log;
// the earlier epochs' leaders metered at their front doors). Every
// replica applies it alike, whatever snapshot it restored: after it the
// pending sums are the same on all.
func (m *meterState) start(epoch int32) {
	m.FromLog = true
	if m.Term == epoch {
		m.PendingBytes, m.PendingRecords = m.TermBytes, m.TermRecords
		return
	}
	m.PendingBytes, m.PendingRecords, m.TermBytes, m.TermRecords = 0, 0, 0, 0
}

// applyMeterClose applies a ControlMeterClose entry, a close or a start.
func (f *fsm) applyMeterClose(l *raft.Log) interface{} {
	at, start, err := raftlog.DecodeMeterEntry(l.Data)
	if err != nil {
		return applyResult{err: fmt.Errorf("apply entry %d: %w", l.Index, err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if start {
		// The epoch the store stamps on this term's batches.
		f.st.Meter.start(int32(uint64(f.epochBase.Load()) + l.Term))
	} else {
		f.st.Meter.close(f.st.HighWatermark, at)
	}
	return applyResult{base: f.st.Meter.Closed.End}
}

// meterNeedsStart reports whether this replica's sums may hold batches
// metered at the front doors (meterState.FromLog) in a partition that has
// data and is not a mirror (a promoted mirror's first batch is not at 0,
// and none of its batches was metered elsewhere).
func (f *fsm) meterNeedsStart() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.st.Meter.FromLog && f.st.Mirror == nil && f.st.HighWatermark > 0
}

// meter returns the last closed range and whether sums are pending.
func (f *fsm) meter() (MeterRange, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.Meter.Closed, f.st.Meter.PendingBytes > 0 || f.st.Meter.PendingRecords > 0
}

// MeterClosed returns the partition's last closed range (End 0: none)
// and whether produce sums are pending, as this replica applied them.
func (r *Replica) MeterClosed() (MeterRange, bool) { return r.fsm.meter() }

// meterLoop is the leader's part of metering, started when Config.Meter
// is set: every MeterInterval, while this replica serves as leader, it
// records the last closed range unless this leader already did, and if
// so and sums are pending, appends a close and records its range.
func (r *Replica) meterLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.MeterInterval)
	defer t.Stop()
	var term uint64       // the term recorded is for
	recorded := int64(-1) // End of the last range recorded in term
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		tm, ok := r.readyEpoch()
		if !ok {
			continue
		}
		if tm != term {
			// A new leader (or this one again after a lapse) does not
			// know whether the last range reached the sink.
			term, recorded = tm, -1
		}
		if r.fsm.meterNeedsStart() {
			if err := r.startMeter(); err != nil {
				r.cfg.Logger.Debug("start produce metering; will retry", "replica", r.cfg.ID, "err", err)
			}
			continue
		}
		closed, pending := r.fsm.meter()
		if closed.End > 0 && closed.End != recorded {
			if !r.recordRange(closed) {
				continue
			}
			recorded = closed.End
		}
		if !pending {
			continue
		}
		closed, err := r.closeMeter()
		if err != nil {
			r.cfg.Logger.Debug("close produce metering; will retry", "replica", r.cfg.ID, "err", err)
			continue
		}
		if closed.End > 0 && r.recordRange(closed) {
			recorded = closed.End
		}
	}
}

// errStopped: the replica closed while a meter call waited.
var errStopped = errors.New("partition: replica stopped")

// closeMeter appends a ControlMeterClose entry and returns the closed
// range once it is applied here.
func (r *Replica) closeMeter() (MeterRange, error) {
	if err := r.appendMeter(raftlog.EncodeMeterClose(time.Now().UnixMilli())); err != nil {
		return MeterRange{}, fmt.Errorf("meter close: %w", err)
	}
	closed, _ := r.fsm.meter()
	return closed, nil
}

// startMeter appends a start entry (meterState.start) and waits for it to
// apply here.
func (r *Replica) startMeter() error {
	if err := r.appendMeter(raftlog.EncodeMeterStart(time.Now().UnixMilli())); err != nil {
		return fmt.Errorf("meter start: %w", err)
	}
	r.cfg.Logger.Info("produce metered from the log from here on: the batches before were metered where they were produced",
		"replica", r.cfg.ID, "high_watermark", r.fsm.highWatermark())
	return nil
}

// appendMeter appends a ControlMeterClose entry of data and waits for it
// to apply here.
func (r *Replica) appendMeter(data []byte) error {
	f := r.raft.ApplyLog(raft.Log{Data: data, Extensions: raftlog.ControlExtension}, r.cfg.ApplyTimeout)
	stopped, err := r.await(f)
	switch {
	case stopped:
		return errStopped
	case err != nil:
		return fmt.Errorf("append: %w", err)
	}
	if res, ok := f.Response().(applyResult); ok && res.err != nil {
		return fmt.Errorf("apply: %w", res.err)
	}
	return nil
}

// recordRange hands c to the sink, bounded by ApplyTimeout and Close, and
// reports whether it was recorded.
func (r *Replica) recordRange(c MeterRange) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
	defer cancel()
	r.cancelOnStop(ctx, cancel)
	if err := r.cfg.Meter.RecordRange(ctx, c); err != nil {
		r.cfg.Logger.Debug("record produce range; will retry", "replica", r.cfg.ID, "end", c.End, "err", err)
		return false
	}
	return true
}
