package replicas

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// DefaultRetentionInterval is how often the Manager runs a retention pass
// over its replicas (Config.RetentionInterval).
const DefaultRetentionInterval = 5 * time.Second

// retentionLoop runs RetentionPass every RetentionInterval. Close stops it.
func (m *Manager) retentionLoop() { m.passLoop(m.cfg.RetentionInterval, m.RetentionPass) }

// untilClose is a context for a loop's work that Close ends.
func (m *Manager) untilClose() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// passLoop runs pass every interval, jittered by up to a fifth either way
// so that the brokers of a cell do not all pass at once, until Close; the
// pass's context ends with it.
func (m *Manager) passLoop(interval time.Duration, pass func(context.Context)) {
	defer m.wg.Done()
	ctx, cancel := m.untilClose()
	defer cancel()
	for {
		t := time.NewTimer(time.Duration(float64(interval) * (0.8 + 0.4*rand.Float64())))
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
		pass(ctx)
	}
}

// RetentionPass runs one retention pass over every replica: each leader
// replicates the log start its topic's retention allows, and every replica
// deletes what the replicated log start and its Raft snapshot allow and
// checkpoints its Raft entries file. A pass over replicas with nothing to
// delete makes no Raft round and touches no file.
func (m *Manager) RetentionPass(ctx context.Context) {
	reps := m.openReplicas(nil)
	for k, r := range reps {
		if ctx.Err() != nil {
			return
		}
		if err := r.RetentionPass(ctx, m.cfg.RetentionTimeout); err != nil && !gone(err) {
			m.cfg.Logger.Warn("retention pass", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
}

// gone reports errors of a replica closed or deposed during its pass.
func gone(err error) bool {
	return errors.Is(err, partition.ErrNotLeader) || errors.Is(err, partition.ErrClosed) || errors.Is(err, partition.ErrRemoved) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, log.ErrClosed) || errors.Is(err, raftlog.ErrStoreClosed) ||
		errors.Is(err, context.Canceled)
}
