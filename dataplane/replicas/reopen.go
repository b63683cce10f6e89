package replicas

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/partition"
)

// askReopen is partition.Config.Reopen: replica k must be closed and
// opened again on its directory, because it found an uncommitted tail its
// leader's snapshot overrules and cut it (partition/diverge.go), or
// because it led for long without serving (partition/barrier.go). It must
// not block: Raft's FSM goroutine or the replica's monitor calls it.
func (m *Manager) askReopen(k key) {
	m.mu.Lock()
	m.reopenWant[k] = true
	m.mu.Unlock()
	select {
	case m.reopenKick <- struct{}{}:
	default:
	}
}

// reopenLoop reopens the replicas that asked for it.
func (m *Manager) reopenLoop() {
	defer m.wg.Done()
	ctx, cancel := m.untilClose() // retention.go
	defer cancel()
	for {
		select {
		case <-m.stop:
			return
		case <-m.reopenKick:
		}
		m.reopenAsked(ctx)
	}
}

// reopenAsked closes every replica that asked to be reopened and opens it
// again from the last cell view Apply had, keeping its files.
func (m *Manager) reopenAsked(ctx context.Context) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	var keys []key
	var reps []*partition.Replica
	for k := range m.reopenWant {
		if r, ok := m.replicas[k]; ok && r.NeedsReopen() && !m.closed {
			keys = append(keys, k)
			reps = append(reps, r)
		}
	}
	clear(m.reopenWant)
	m.mu.Unlock()
	if len(keys) == 0 || m.lastView == nil {
		return
	}
	for i, k := range keys {
		m.dropMirror(k) // its puller and serving use the replica
		m.mu.Lock()
		delete(m.replicas, k)
		m.mu.Unlock()
		if err := reps[i].Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			m.cfg.Logger.Warn("close a replica to reopen it", "topic_id", k.topic, "partition", k.part, "err", err)
		}
		m.cfg.Logger.Info("replica closed to be reopened", "topic_id", k.topic, "partition", k.part)
	}
	// Apply opens what the view wants and is not open: these replicas,
	// on the files they have.
	if err := m.apply(ctx, m.lastView); err != nil && ctx.Err() == nil {
		m.cfg.Logger.Warn("reopen replicas", "err", err)
	}
}
