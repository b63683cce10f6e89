package replicas

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/dataplane/mirror"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// The move loop does the steps of a tenant move that only a partition's
// leader can take, every check interval and after every Apply, so that a
// new leader takes them too (each is idempotent):
//
//   - source, Topic.Fenced: the leader fences the partition; Fenced false
//     after true unfences it (a rollback), on a partition that is not a
//     destination still mirroring;
//   - destination, Mirror.Promote: the leader promotes its mirror once the
//     source is fenced and everything below the fenced end is mirrored,
//     retrying until the promotion holds;
//   - destination, Mirror gone before the promotion (a cancelled move): the
//     leader fences its mirror, which marks the abandonment in the group's
//     log, and every replica that sees it deletes itself. A replica never
//     decides alone that a mirror was not promoted: a follower may not have
//     applied a promotion its leader made, and deleting a voter's data
//     loses what it acknowledged.

// moveTimeout bounds one fence, unfence or promotion.
const moveTimeout = 10 * time.Second

// cancelGrace is how long a cancelled destination replica stays after it
// saw the fence that abandons it, so that its group's other replicas learn
// of the fence from this one (a leader) before it goes.
const cancelGrace = 2 * time.Second

// promotePoll is how often the move loop looks again while a promotion
// waits for its puller to see the fence or copy the last batches: the
// producers of a moving tenant wait from the fence to the promotion.
const promotePoll = 20 * time.Millisecond

// moveLoop runs driveMoves until Close: every check interval, at once
// after an Apply, and every promotePoll while a promotion waits.
func (m *Manager) moveLoop() {
	defer m.wg.Done()
	every := m.checkEvery()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.moveKick:
		}
		next := every
		if m.driveMoves() {
			next = min(every, promotePoll)
		}
		t.Stop()
		select { // a kick may have fired the timer meanwhile
		case <-t.C:
		default:
		}
		t.Reset(next)
	}
}

// kickMoves asks the move loop for a pass now.
func (m *Manager) kickMoves() {
	select {
	case m.moveKick <- struct{}{}:
	default:
	}
}

// driveMoves is one pass of the move loop. waiting says a promotion is
// due but not done yet.
func (m *Manager) driveMoves() (waiting bool) {
	open := m.openReplicas(nil)
	m.mir.mu.Lock()
	moves := m.mir.topics
	m.mir.mu.Unlock()
	var doomed []key
	for k, r := range open {
		mv, listed := moves[k.topic]
		if !listed {
			continue
		}
		mirroring := r.Mirroring()
		_, fenced := r.Fenced()
		switch {
		case mirroring && fenced:
			if m.doomed(k) {
				doomed = append(doomed, k)
			}
		case mirroring && mv.mirror == nil:
			if r.IsLeader() {
				m.leaderStep(k, "fence the mirror of a cancelled move", func(ctx context.Context) error {
					_, err := r.Fence(ctx)
					return err
				})
			}
		case !mirroring && r.MirrorStarted():
			m.unmarkOnce(k) // promoted, maybe after the Apply that saw it mirroring
		case mirroring:
			if mv.mirror.Promote && mv.bad == nil && r.IsLeader() && r.MirrorStarted() {
				waiting = !m.promote(k, r) || waiting
			}
		}
		switch {
		case mirroring:
		case mv.fenced && !fenced && r.IsLeader():
			m.leaderStep(k, "fence for a tenant move", func(ctx context.Context) error {
				_, err := r.Fence(ctx)
				return err
			})
		case !mv.fenced && fenced && r.IsLeader():
			m.leaderStep(k, "unfence: the tenant move was rolled back", r.Unfence)
		}
	}
	if len(doomed) == 0 {
		return waiting
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	for _, k := range doomed {
		m.mu.RLock()
		r, ok := m.replicas[k]
		m.mu.RUnlock()
		if !ok || r != open[k] {
			continue // Apply replaced or removed it meanwhile
		}
		if err := m.setCancelled(k, true); err != nil {
			m.cfg.Logger.Warn("record cancelled mirror; keeping the replica", "topic_id", k.topic, "partition", k.part, "err", err)
			continue
		}
		m.cfg.Logger.Info("tenant move cancelled before promotion; deleting the destination replica", "topic_id", k.topic, "partition", k.part)
		if err := m.remove(k); err != nil {
			m.cfg.Logger.Warn("delete cancelled mirror replica", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
	return waiting
}

// doomed reports whether a fenced mirror has waited cancelGrace since this
// broker first saw it fenced.
func (m *Manager) doomed(k key) bool {
	m.mir.mu.Lock()
	defer m.mir.mu.Unlock()
	at, ok := m.mir.doomedAt[k]
	if !ok {
		m.mir.doomedAt[k] = time.Now()
		return false
	}
	return time.Since(at) >= cancelGrace
}

// leaderStep runs one replicated step on a leader, bounded, and logs it.
func (m *Manager) leaderStep(k key, what string, step func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	defer cancel()
	var nl *partition.NotLeaderError
	switch err := step(ctx); {
	case err == nil:
		m.cfg.Logger.Info("tenant move step done", "step", what, "topic_id", k.topic, "partition", k.part)
	case errors.As(err, &nl):
		// Leadership moved; the new leader takes the step.
	default:
		m.cfg.Logger.Warn("tenant move step failed; will retry", "step", what, "topic_id", k.topic, "partition", k.part, "err", err)
	}
}

// promote promotes k's mirror once its puller saw the source fenced and
// mirrored everything below the fenced end, and reports whether it did.
func (m *Manager) promote(k key, r *partition.Replica) bool {
	m.mir.mu.Lock()
	p := m.mir.pulls[k]
	m.mir.mu.Unlock()
	if p == nil || p.replica != r {
		return false
	}
	st := p.puller.Status()
	if !st.SourceFenced || r.HighWatermark() < st.FencedEnd {
		return false // not yet: the puller is still copying, or the source not fenced
	}
	ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
	defer cancel()
	err := mirror.Promote(ctx, r, p.source)
	var nl *partition.NotLeaderError
	msg := ""
	switch {
	case err == nil:
		m.cfg.Logger.Info("mirror promoted: the partition takes produce", "topic_id", k.topic, "partition", k.part, "end_offset", st.FencedEnd)
	case errors.Is(err, mirror.ErrNotCaughtUp), errors.As(err, &nl):
		// A pull is still applying, or leadership moved: the next pass.
	default:
		msg = err.Error()
	}
	m.mir.mu.Lock()
	changed := p.promoteErr != msg
	p.promoteErr = msg
	m.mir.mu.Unlock()
	if msg != "" && changed { // once per distinct failure: the loop retries every promotePoll
		m.cfg.Logger.Warn("promote mirror; will retry", "topic_id", k.topic, "partition", k.part, "err", err)
	}
	return err == nil
}
