package partition

import (
	"context"
	"slices"

	"github.com/hashicorp/raft"
)

// campaigner is a transport that can make its own group's Raft start an
// election at once (transport.GroupTransport.Campaign).
type campaigner interface {
	Campaign(ctx context.Context) error
}

// campaignFirst makes the preferred replica of a group it has just
// bootstrapped its first leader without waiting out a heartbeat timeout
// (5 s in production): a new partition serves within milliseconds. The
// other replicas hold no configuration yet, so they never campaign
// themselves and grant the vote; see DESIGN.md, "Leaders in milliseconds".
func (r *Replica) campaignFirst() {
	defer r.wg.Done()
	if r.campaign("new group") {
		r.cfg.Logger.Debug("preferred replica of a new group campaigns at once", "replica", r.cfg.ID)
	}
}

// campaign starts an election on this replica now if it is a follower
// that knows no leader and is a voter in its latest configuration; it
// reports whether it did. Raft's election rules are unchanged (one vote
// per term, only for an up-to-date log), so this is only ever early, never
// unsafe.
func (r *Replica) campaign(why string) bool {
	c, ok := r.cfg.Transport.(campaigner)
	if !ok || r.raft.State() != raft.Follower {
		return false
	}
	if _, id := r.raft.LeaderWithID(); id != "" {
		return false
	}
	f := r.raft.GetConfiguration()
	if stopped, err := r.await(f); stopped || err != nil {
		return false
	}
	if !slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool {
		return s.ID == r.cfg.ID && s.Suffrage == raft.Voter
	}) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ApplyTimeout)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.Campaign(ctx); err != nil {
		r.cfg.Logger.Debug("campaign failed", "replica", r.cfg.ID, "why", why, "error", err)
		return false
	}
	return true
}

// ElectedHere reports whether this replica has won its group's election
// and is applying the entries of earlier terms before it serves (its
// barrier): for a moment it is the leader but not yet serving. A front
// door answers a request in that moment with NOT_LEADER_OR_FOLLOWER that
// names this broker, so the client retries here shortly instead of
// looking for another leader.
func (r *Replica) ElectedHere() bool {
	return r.raft.State() == raft.Leader && !r.ready()
}
