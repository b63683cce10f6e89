package partition

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// barrier makes this new leader apply every earlier entry before it
// serves: afterwards its high watermark is at least any a previous leader
// exposed.
//
// A barrier that fails while this replica still leads the same term is
// sent again, after a pause that doubles up to a second: Raft keeps a
// leader whose followers hear from it, so a leader that gave up here would
// hold its partition without serving it until something deposed it (a
// partition of a live cell went 8½ minutes without a serving leader that
// way, see docs/benchmarks.md). A barrier that never completes is
// checkUnready's to deal with.
func (r *Replica) barrier(term uint64) {
	defer r.wg.Done()
	pause := 20 * time.Millisecond
	for {
		if r.raft.State() != raft.Leader || r.raft.CurrentTerm() != term {
			return
		}
		stopped, err := r.await(r.barrierFuture())
		if stopped {
			return
		}
		if err == nil {
			break
		}
		if !errors.Is(err, raft.ErrEnqueueTimeout) {
			// Losing leadership is the usual reason, and the loop ends on
			// it; anything else is worth a line.
			if r.raft.State() == raft.Leader && r.raft.CurrentTerm() == term {
				r.cfg.Logger.Info("partition leader barrier failed; sending it again", "replica", r.cfg.ID, "term", term, "in", pause, "error", err)
			}
			if !r.sleep(pause) {
				return
			}
			pause = min(2*pause, time.Second)
		}
	}
	r.mu.Lock()
	if r.raft.CurrentTerm() == term {
		r.readyTerm = term
		r.transferAfter = time.Now().Add(3 * r.cfg.CheckInterval)
		r.slowTransfers = 0
	}
	r.mu.Unlock()
	r.wake(-1)
	r.cfg.Logger.Info("partition leader serving", "replica", r.cfg.ID, "term", term, "high_watermark", r.fsm.highWatermark())
}

// barrierFuture starts Raft's barrier, or the test's stand-in.
func (r *Replica) barrierFuture() raft.Future {
	if fn := r.barrierFn.Load(); fn != nil {
		return (*fn)(r.cfg.ApplyTimeout)
	}
	return r.raft.Barrier(r.cfg.ApplyTimeout)
}

// unreadyLimit is how long a leader may go without serving (its barrier
// not done) before checkUnready hands leadership away: two election
// timeouts or ten check intervals, and at least minUnreadyLimit (20 s
// with the production settings). A barrier takes a commit round and the
// apply of what the replica had not applied, seconds at most under heavy
// load; the floor keeps the test cells' short timeouts (2 s alone) from
// taking a slow barrier on a busy machine for a stuck one.
func (r *Replica) unreadyLimit() time.Duration {
	return max(2*r.cfg.Raft.ElectionTimeout, 10*r.cfg.CheckInterval, minUnreadyLimit)
}

// minUnreadyLimit is unreadyLimit's floor.
const minUnreadyLimit = 10 * time.Second

// checkUnready runs on the monitor's tick. A replica that has led for
// unreadyLimit without passing its barrier serves nothing, yet Raft keeps
// it leader for as long as its followers hear from it, and none of them
// campaigns. The first time, it logs what Raft reports and hands
// leadership to another voter whose broker answers (transferring to the
// most caught-up one, Raft's own choice, could pick a dead broker's
// replica again and again). If it still leads without serving one
// unreadyLimit later, it asks to be closed and opened again
// (Config.Reopen): its Raft stops, the followers stop hearing from it and
// elect one of themselves. The partition served nothing meanwhile, so
// neither step costs writes.
func (r *Replica) checkUnready(now time.Time) {
	limit := r.unreadyLimit()
	r.mu.Lock()
	since := r.electedAt
	act := !since.IsZero() && r.readyTerm == 0 && now.Sub(since) >= limit
	if act {
		r.electedAt = now
		r.unreadyTries++
	}
	tries := r.unreadyTries
	r.mu.Unlock()
	if !act || r.raft.State() != raft.Leader {
		return
	}
	st := r.raft.Stats()
	log := r.cfg.Logger.With("replica", r.cfg.ID, "term", r.raft.CurrentTerm(),
		"commit_index", st["commit_index"], "last_log_index", st["last_log_index"],
		"applied_index", st["applied_index"], "fsm_pending", st["fsm_pending"])
	to, ok := r.handOffTarget()
	if tries > 1 || !ok {
		log.Warn("partition leader still does not serve; asking to be reopened", "unready_for", limit*time.Duration(tries))
		r.askReopen()
		return
	}
	log.Warn("partition leader has not served since it was elected; handing leadership away", "unready_for", limit, "to", to.ID)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if stopped, err := r.await(r.transferTo(to)); !stopped && err != nil {
			log.Warn("partition leader that does not serve could not hand leadership away", "to", to.ID, "error", err)
		}
	}()
}

// handOffTarget is the first voter other than this replica, in order of
// preference, whose broker answers probes (any, without per-broker
// failure detection).
func (r *Replica) handOffTarget() (raft.Server, bool) {
	for _, s := range r.peersNow() {
		if s.ID == r.cfg.ID || s.Suffrage != raft.Voter {
			continue
		}
		if r.peers == nil || r.peers.PeerAnswering(s.ID) {
			return s, true
		}
	}
	return raft.Server{}, false
}

// transferTo starts a leadership transfer to s: Raft's, or the test's
// stand-in (SetTransfer).
func (r *Replica) transferTo(s raft.Server) raft.Future {
	if t := r.transfer.Load(); t != nil {
		return (*t)(s.ID, s.Address)
	}
	return r.raft.LeadershipTransferToServer(s.ID, s.Address)
}
