package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// ErrBehindLogStart: this replica received a snapshot for data its log
// does not hold (it was behind the leader's log start, so Raft could not
// catch it up by log replication), or it is new. It serves nothing until
// it is seeded from a peer's segments (seed.go); see DESIGN.md, "Seeding a
// replica from segments".
var ErrBehindLogStart = errors.New("partition: replica is behind the leader's log start")

// The log start offset is replicated: the leader decides where it moves
// (retention, DeleteRecords) and appends the decision to the Raft log as a
// control entry, which takes no Kafka offset; every replica's FSM applies
// it at the same index, so all agree on the log start offset and it never
// goes backwards, also across leader changes (a new leader has every
// committed decision). Deleting the files is local and lags: a replica
// deletes segments below the replicated start only once its latest Raft
// snapshot covers their entries, because Raft replays the entries after its
// snapshot at a restart and must find their batches.

// BehindLogStart reports whether the replica is behind the leader's log
// start (ErrBehindLogStart), and so being seeded.
func (r *Replica) BehindLogStart() bool { return r.fsm.isBehind() }

// EnforceRetention is the leader's retention pass: if retention.ms or
// retention.bytes allow closed segments wholly below the high watermark
// to go, it replicates the new log start offset and returns it once
// committed and applied here. Followers and a leader with nothing to
// delete return the current start with no Raft round.
func (r *Replica) EnforceRetention(ctx context.Context) (int64, error) {
	start := r.LogStartOffset()
	if !r.ready() || r.fsm.isBehind() {
		return start, nil
	}
	to, err := r.store.Log().RetentionPoint(r.fsm.highWatermark())
	if err != nil {
		return start, fmt.Errorf("retention: %w", err)
	}
	if to <= start {
		return start, nil
	}
	return r.moveLogStart(ctx, to)
}

// DeleteRecords moves the log start offset forward to offset (Kafka's
// DeleteRecords; -1 means the high watermark), through Raft, and returns
// the new log start (the partition's low watermark) once committed. An
// offset above the high watermark fails with log.ErrOffsetOutOfRange; one
// at or below the current start changes nothing. Only the serving leader
// answers.
func (r *Replica) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	if !r.ready() {
		return 0, r.notLeader(nil)
	}
	if r.fsm.isBehind() {
		return 0, fmt.Errorf("delete records: %w", ErrBehindLogStart)
	}
	hw := r.fsm.highWatermark()
	switch {
	case offset == -1:
		offset = hw
	case offset < 0:
		return 0, fmt.Errorf("delete records to %d: %w: an offset is -1 (the high watermark) or at least 0", offset, log.ErrOffsetOutOfRange)
	case offset > hw:
		return 0, fmt.Errorf("delete records to %d: %w: the high watermark is %d", offset, log.ErrOffsetOutOfRange, hw)
	}
	if start := r.LogStartOffset(); offset <= start {
		return start, nil
	}
	return r.moveLogStart(ctx, offset)
}

// moveLogStart replicates "the log start is now to" and waits for it.
func (r *Replica) moveLogStart(ctx context.Context, to int64) (int64, error) {
	f := r.raft.ApplyLog(raft.Log{Data: raftlog.EncodeLogStart(to), Extensions: raftlog.ControlExtension}, r.applyTimeout(ctx))
	start, err := r.awaitApply(ctx, f) // mirror.go
	if err != nil {
		return 0, fmt.Errorf("move log start to %d: %w", to, err)
	}
	r.cfg.Logger.Info("partition log start moved", "replica", r.cfg.ID, "log_start_offset", start)
	return start, nil
}

// Checkpoint is every replica's local housekeeping after the log start
// moved: it deletes the segments below the replicated log start that the
// latest Raft snapshot covers (taking a snapshot first when it does not),
// and checkpoints the Raft entries file below them. It is cheap when
// there is nothing to do. It returns how many entry records it dropped.
func (r *Replica) Checkpoint(ctx context.Context) (int, error) {
	if r.fsm.isBehind() {
		return 0, nil // seeding replaces the log (seed.go)
	}
	l := r.store.Log()
	want := r.LogStartOffset()
	if want <= l.LogStartOffset() {
		return r.compactEntries()
	}
	snap, cover := r.snapshotCover()
	if cover < want {
		// A snapshot of the partition state is a few hundred bytes.
		if stopped, err := r.await(r.raft.Snapshot()); stopped {
			return 0, nil
		} else if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return 0, fmt.Errorf("checkpoint: snapshot: %w", err)
		}
		snap, cover = r.snapshotCover()
	}
	if to := min(want, cover); to > l.LogStartOffset() {
		if err := l.DeleteHead(to); err != nil {
			return 0, fmt.Errorf("checkpoint: %w", err)
		}
	}
	_ = snap
	return r.compactEntries()
}

// snapshotCover is the index of Raft's latest snapshot and the Kafka
// offset below which its entries' batches lie (0 without a snapshot).
func (r *Replica) snapshotCover() (uint64, int64) {
	idx, err := strconv.ParseUint(r.raft.Stats()["last_snapshot_index"], 10, 64)
	if err != nil || idx == 0 {
		return 0, 0
	}
	cover, ok := r.store.KafkaOffsetThrough(idx)
	if !ok {
		return idx, 0
	}
	return idx, cover
}

func (r *Replica) compactEntries() (int, error) {
	if !r.store.Compactable() {
		return 0, nil
	}
	idx, _ := r.snapshotCover()
	if idx == 0 {
		return 0, nil
	}
	n, err := r.store.CompactEntries(idx)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return n, nil
}

// RetentionPass runs one retention pass on a replica: the leader's
// decision, then the local checkpoint. A replica stuck behind the leader's
// log start that leads hands leadership away, since it cannot serve.
func (r *Replica) RetentionPass(ctx context.Context, timeout time.Duration) error {
	if r.fsm.isBehind() && r.raft.State() == raft.Leader {
		r.raft.LeadershipTransfer()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := r.EnforceRetention(ctx)
	if _, cerr := r.Checkpoint(ctx); err == nil {
		err = cerr
	}
	return err
}
