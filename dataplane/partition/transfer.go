package partition

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// maxTransferBackoff bounds the wait after failed transfers in a row.
const maxTransferBackoff = 5 * time.Minute

// transferBackoff is the wait before the next transfer to the preferred
// replica after n slow failures in a row: three check intervals, doubled
// for each failure after the first, at most maxTransferBackoff.
func transferBackoff(n int, interval time.Duration) time.Duration {
	d := 3 * interval
	for i := 1; i < n && d < maxTransferBackoff; i++ {
		d *= 2
	}
	return min(d, maxTransferBackoff)
}

// maybeTransfer hands leadership to the preferred replica (Peers[0]) when
// this replica leads, has served for a few check intervals, and the
// preferred replica answers heartbeats. LeadershipTransferToServer catches
// the target up before it asks it to campaign and gives up after an
// election timeout if it cannot.
//
// The leader refuses writes while a transfer lasts, up to an election
// timeout and, once the target was told to campaign, as long again. A
// target that keeps failing to take over would make that most of the
// time, so each slow failure in a row doubles the wait before the next
// attempt (transferBackoff); serving a new term starts the count again.
// A failure that refused writes for less than a check interval (the
// target's broker refused the connection) only waits the usual intervals.
func (r *Replica) maybeTransfer() {
	peers := r.peersNow()
	if len(peers) == 0 || peers[0].ID == r.cfg.ID || !r.ready() || r.moving() {
		return
	}
	pref := peers[0]
	r.mu.Lock()
	settled := !time.Now().Before(r.transferAfter)
	// A target whose broker is down, or came back a moment ago (it may
	// have far to catch up), would cost the whole outage above.
	healthy := !r.failing[pref.ID] && time.Since(r.peerUp[pref.ID]) >= 3*r.cfg.CheckInterval
	r.mu.Unlock()
	if r.peerIsDown(pref.ID) {
		healthy = false
	}
	if !settled || !healthy || !r.caughtUp(pref.ID) {
		return
	}
	f := r.raft.GetConfiguration()
	if stopped, err := r.await(f); err != nil || stopped {
		return
	}
	voter := slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool {
		return s.ID == pref.ID && s.Suffrage == raft.Voter
	})
	if !voter {
		return
	}
	began := time.Now()
	stopped, err := r.await(r.transferTo(pref))
	if stopped || err == nil {
		return
	}
	took := time.Since(began)
	r.mu.Lock()
	wait := 3 * r.cfg.CheckInterval
	if took >= r.cfg.CheckInterval {
		r.slowTransfers++
		wait = transferBackoff(r.slowTransfers, r.cfg.CheckInterval)
	}
	r.transferAfter = time.Now().Add(wait)
	slow := r.slowTransfers
	r.mu.Unlock()
	// Writes were refused while it lasted: worth a line at info.
	r.cfg.Logger.Info("leadership transfer to preferred replica failed", "replica", r.cfg.ID, "to", pref.ID,
		"took", took.Round(time.Millisecond), "slow_failures_in_a_row", slow, "next_in", wait, "error", err)
}
