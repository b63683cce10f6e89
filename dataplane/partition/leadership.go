package partition

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// campaigner is a transport that can make its own group's Raft start an
// election at once (transport.GroupTransport.Campaign).
type campaigner interface {
	Campaign(ctx context.Context) error
}

// campaignFirst makes the preferred replica of a group it has just
// bootstrapped its first leader without waiting out a heartbeat timeout
// (10 s in production): a new partition serves within milliseconds. The
// other replicas hold no configuration yet, so they never campaign
// themselves and grant the vote; see DESIGN.md, "Leaders in milliseconds".
func (r *Replica) campaignFirst() {
	defer r.wg.Done()
	if r.campaign("new group", "") {
		r.cfg.Logger.Debug("preferred replica of a new group campaigns at once", "replica", r.cfg.ID)
	}
}

// campaign starts an election on this replica now if it is a follower
// that knows no leader (or only dead, the leader it believes in) and is a
// voter in its latest configuration; it reports whether it did. Raft's
// election rules are unchanged (one vote per term, only for an up-to-date
// log), so this is only ever early, never unsafe.
func (r *Replica) campaign(why string, dead raft.ServerID) bool {
	c, ok := r.cfg.Transport.(campaigner)
	if !ok || r.raft.State() != raft.Follower || r.fsm.isBehind() || r.gate.gated() {
		return false // a replica being seeded could not serve; a joining one does not vote yet
	}
	if _, id := r.raft.LeaderWithID(); id != "" && id != dead {
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
	r.cancelOnStop(ctx, cancel)
	if err := c.Campaign(ctx); err != nil {
		r.cfg.Logger.Debug("campaign failed", "replica", r.cfg.ID, "why", why, "error", err)
		return false
	}
	return true
}

// cancelOnStop calls cancel when the replica stops, so a call bounded by
// ctx (a campaign, a meter sink write, a seed) never outlives Close. The
// watching goroutine ends with ctx, so the caller must cancel it.
func (r *Replica) cancelOnStop(ctx context.Context, cancel context.CancelFunc) {
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
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

// peerWatcher is a transport that detects dead peer brokers for all its
// groups at once (transport.GroupTransport's liveness probe).
type peerWatcher interface {
	WatchPeers(servers []raft.Server)
	OnPeerDown(fn func(id raft.ServerID, down bool))
	// PeerDown: the broker is not answering, or restarted a moment ago
	// (so a leader it had is gone even if it answers).
	PeerDown(id raft.ServerID) bool
	// PeerAnswering: the broker answers, restarted or not, so its
	// replica can vote and campaign.
	PeerAnswering(id raft.ServerID) bool
}

// DefaultFailoverStagger is Config.FailoverStagger's default.
const DefaultFailoverStagger = 500 * time.Millisecond

// voteRefusalReporter is a transport that says when its group's Raft
// refuses a vote request (transport.GroupTransport.OnVoteRefused).
type voteRefusalReporter interface {
	OnVoteRefused(fn func(term uint64))
}

// watchPeers subscribes the replica to its transport's per-broker failure
// detection. Called once from start.
func (r *Replica) watchPeers() {
	w, ok := r.cfg.Transport.(peerWatcher)
	if !ok {
		return
	}
	r.peers, r.openedAt = w, time.Now()
	w.WatchPeers(r.cfg.Peers)
	if v, ok := r.cfg.Transport.(voteRefusalReporter); ok {
		v.OnVoteRefused(r.noteRefusal)
	}
	// With brokers watched, heartbeats to caught-up followers on live
	// brokers need not all be sent (transport.GroupTransport.QuiesceHeartbeats).
	if q, ok := r.cfg.Transport.(interface{ QuiesceHeartbeats(time.Duration) }); ok {
		q.QuiesceHeartbeats(r.cfg.Raft.HeartbeatTimeout)
	}
	w.OnPeerDown(func(id raft.ServerID, down bool) {
		if !down {
			r.mu.Lock()
			r.peerUp[id] = time.Now()
			r.mu.Unlock()
			return
		}
		select {
		case r.peerDown <- id:
		default: // the monitor has one pending; it re-reads state anyway
		}
	})
}

// onPeerDown runs on the monitor when the transport finds broker id down:
// if id led this replica's group, the replica schedules its campaign,
// staggered by its rank among the live voters.
//
// A replica that sees a majority of its voters' brokers down does not
// campaign: it cannot win, and its campaign, a TimeoutNow candidacy that
// hashicorp/raft keeps for its 10–20 s election timeout, would only
// raise its term. An isolated broker's replicas used to do that; when
// the link healed, the higher term deposed the healthy leaders, and a
// leader's transfer to such a candidate (its preferred replica) refused
// writes for 10 s and timed out. Once its majority answers again,
// retryFailover takes the succession up, so a follower that found its
// other peer silent for a moment (a probe late under load) does not leave
// the group to Raft's own timeouts.
func (r *Replica) onPeerDown(id raft.ServerID) {
	if r.NoQuorum() {
		// Distinct from a leader moving: nothing can be elected until a
		// majority of the voters' brokers answer again.
		r.cfg.Logger.Warn("partition has lost its majority: no leader until its replicas' brokers return", "replica", r.cfg.ID, "down", id)
		r.deferFailover(id)
		return
	}
	if r.raft.State() != raft.Follower {
		return
	}
	if _, leader := r.raft.LeaderWithID(); !r.succeeds(id, leader, time.Now()) {
		return
	}
	rank, term := r.rankAfter(id), r.raft.CurrentTerm()
	wait := time.Duration(rank) * r.staggerAfter(id)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		refused := false
		if rank > 0 {
			var ok bool
			if ok, refused = r.outranksCampaign(term, wait); !ok {
				r.cfg.Logger.Debug("a replica ranked before this one is being elected; not campaigning", "replica", r.cfg.ID, "dead_leader", id, "rank", rank)
				return
			}
		}
		if !r.peers.PeerDown(id) {
			return // it answered again: no election
		}
		if r.NoQuorum() || !r.majorityAnsweringNow() {
			r.cfg.Logger.Info("leader's broker is down, but a majority of the voters' brokers have not answered lately; not campaigning yet",
				"replica", r.cfg.ID, "dead_leader", id)
			r.deferFailover(id)
			return
		}
		if r.campaign("leader's broker down", id) {
			r.cfg.Logger.Info("leader's broker is down; campaigning", "replica", r.cfg.ID, "dead_leader", id, "rank", rank, "refused_candidate", refused)
		}
	}()
}

// deferFailover records that the replica passed over succeeding dead
// because too few of its voters' brokers answered.
func (r *Replica) deferFailover(dead raft.ServerID) {
	r.mu.Lock()
	r.deferredDown = dead
	r.mu.Unlock()
}

// retryFailover runs on the monitor's tick: once a majority of the
// voters' brokers answer again after a succession was deferred, the
// replica takes it up as if the dead leader's broker were found down now
// (onPeerDown: only a follower whose leader is still that broker, or
// none, campaigns, ranked and staggered as then). Nothing else would: the
// transport reports a broker found down once, and a peer answering again
// is no new report. Two survivors that each missed the other's probes
// for a moment when the leader died used to wait out Raft's election
// timeout (10 s here). If the dead broker answers again first, its
// leadership, if it kept any, stands.
func (r *Replica) retryFailover() {
	r.mu.Lock()
	dead := r.deferredDown
	r.mu.Unlock()
	if dead == "" || r.NoQuorum() || !r.majorityAnsweringNow() {
		return
	}
	r.deferFailover("")
	if r.peers.PeerDown(dead) {
		r.onPeerDown(dead)
	}
}

// sleep waits d, or until the replica stops; it reports whether d passed.
func (r *Replica) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.stop:
		return false
	case <-t.C:
		return true
	}
}

// staggerAfter is the wait per rank before this replica campaigns to
// succeed dead: Config.FailoverStagger if a replica ranked before it is
// on a broker that came back within unknownLeaderGrace (it may not
// campaign), three times that otherwise, where those ranked first have
// been up long enough to campaign themselves: the first candidate's vote
// then takes its time to arrive under load, and a replica that granted
// it stops waiting at once (outranksCampaign).
func (r *Replica) staggerAfter(dead raft.ServerID) time.Duration {
	peers := r.peersNow()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range peers {
		if p.ID == r.cfg.ID {
			break
		}
		if up, ok := r.peerUp[p.ID]; ok && p.ID != dead && time.Since(up) < unknownLeaderGrace {
			return r.cfg.FailoverStagger
		}
	}
	return 3 * r.cfg.FailoverStagger
}

// outranksCampaign waits out a replica's stagger and reports whether it,
// ranked after the first candidate to succeed a dead leader of term,
// should still campaign, and whether it is because it refused a
// candidate. It should not if it has granted its vote in a later term
// meanwhile: a candidate ranked before it then has the majority it needs
// and is only slow to say so (under load a vote takes hundreds of
// milliseconds: the candidate stores its term and the voter its term and
// vote, each in the fsynced stable file). Campaigning anyway deposes that
// new leader with a higher term, and since its log now ends in the new
// term it refuses the vote: both wait out Raft's election timeout (10 to
// 20 s). In a kill of a broker that led 100 partitions under load, half
// of them served 14 to 22 s after the kill.
//
// It should if it refused a candidate of a later term (a log behind its
// own, typically a replica whose broker restarted a moment ago) and that
// refusal leaves the candidate short of a majority: that candidate stays
// a candidate for Raft's election timeout, so this replica campaigns at
// once, in a higher term that the refused candidate grants. It used to
// wait out its stagger and then one FailoverStagger more for the term to
// show the refusal: 1 to 2 s more without a leader. A term that moved
// without a vote from this replica and without a refusal seen (the
// transport reports none) means the same, once the vote has had time to
// be recorded (the term is stored before the vote, each with its own
// fsync). An unchanged term means nobody campaigned.
func (r *Replica) outranksCampaign(term uint64, stagger time.Duration) (campaign, refused bool) {
	end := time.Now().Add(stagger)
	for time.Now().Before(end) {
		if r.votedAfter(term) {
			return false, false
		}
		if r.refusalDecides(term) {
			return true, true
		}
		if !r.sleep(min(20*time.Millisecond, time.Until(end))) {
			return false, false
		}
	}
	settle := time.Now().Add(r.cfg.FailoverStagger)
	for r.raft.CurrentTerm() != term {
		if r.votedAfter(term) {
			return false, false
		}
		if r.refusalDecides(term) {
			return true, true
		}
		if time.Now().After(settle) {
			return true, false
		}
		if !r.sleep(20 * time.Millisecond) {
			return false, false
		}
	}
	return true, false
}

// noteRefusal records that this replica's Raft refused a vote request of
// term (transport.GroupTransport.OnVoteRefused).
func (r *Replica) noteRefusal(term uint64) {
	for {
		old := r.refusedTerm.Load()
		if term <= old || r.refusedTerm.CompareAndSwap(old, term) {
			return
		}
	}
}

// refusalDecides reports whether this replica refused a candidate of a
// term after term and, with the dead leader and this replica's refusal,
// that candidate cannot reach a majority of the group's voters: with V
// voters it needs V/2 votes besides its own, and at most V-3 are left.
func (r *Replica) refusalDecides(term uint64) bool {
	if r.refusedTerm.Load() <= term {
		return false
	}
	voters := 0
	for _, s := range r.peersNow() {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	return voters-3 < voters/2
}

// votedAfter reports whether this replica's Raft has granted a vote in a
// term after term.
func (r *Replica) votedAfter(term uint64) bool {
	voted, err := r.stable.GetUint64(raftLastVoteTerm)
	return err == nil && voted > term
}

// raftLastVoteTerm is the stable-store key under which hashicorp/raft
// records the term of the last vote it granted (its own candidacy's too).
var raftLastVoteTerm = []byte("LastVoteTerm")

// unknownLeaderGrace is how long a replica that has heard from no leader
// since it opened waits before a peer broker's death may make it
// campaign. A replica just restarted knows no leader until the current
// one's first append reaches it (about a second, more under load). It
// used to campaign at once, deposing a healthy leader on another broker
// (a campaign's vote request bypasses Raft's leader stickiness) with a
// log that could not win: in a compare run of repeated kills, each two
// seconds after the previous broker's restart, partitions led elsewhere
// that a just-restarted replica campaigned for had their next serving
// leader up to 3.5 minutes later.
const unknownLeaderGrace = 3 * time.Second

// succeeds reports whether this replica, believing leader leads, should
// take part in replacing dead, whose broker was found down: dead is the
// leader it knows, or it knows none and has been open for
// unknownLeaderGrace (a leader elected meanwhile would have reached it).
func (r *Replica) succeeds(dead, leader raft.ServerID, now time.Time) bool {
	switch leader {
	case dead:
		return true
	case "":
		return now.Sub(r.openedAt) >= unknownLeaderGrace
	}
	return false
}

// rankAfter is this replica's campaignRank after dead's broker went down.
func (r *Replica) rankAfter(dead raft.ServerID) int {
	return campaignRank(r.peersNow(), r.cfg.ID, dead, r.peers.PeerAnswering)
}

// campaignRank is replica self's place among the candidates to succeed
// dead, the leader whose broker was found down: the voters of peers before
// it whose brokers answer. A broker that restarted a moment ago answers
// and counts: its replica campaigns too, and ranking it out gave two
// followers rank 0, whose campaigns split the vote and left the partition
// without a leader for Raft's election timeout, twice over (17.7 s in a
// compare kill run).
func campaignRank(peers []raft.Server, self, dead raft.ServerID, answering func(raft.ServerID) bool) int {
	rank := 0
	for _, p := range peers {
		if p.ID == self {
			break
		}
		if p.ID != dead && answering(p.ID) {
			rank++
		}
	}
	return rank
}

// majorityAnsweringNow reports whether this replica and the voters'
// brokers that answered a probe lately (transport.Node.PeerAnsweringNow)
// make a majority of the group's voters. When this broker is cut off from
// all others, the first peer found down comes a probe or so before the
// rest: NoQuorum still counts them as answering then, and the replica
// would campaign alone (seen in a chaos run after an isolate, with the
// transfer timeout that follows). Without such a transport it is true.
func (r *Replica) majorityAnsweringNow() bool {
	p, ok := r.cfg.Transport.(interface{ PeerAnsweringNow(raft.ServerID) bool })
	if !ok {
		return true
	}
	voters, up := r.votersUp(p.PeerAnsweringNow)
	return up >= voters/2+1
}

// votersUp counts the voters of the group's configuration (Peers as
// placed, or as moved) and those among them that are up: this replica,
// and every other for which answering holds.
func (r *Replica) votersUp(answering func(raft.ServerID) bool) (voters, up int) {
	for _, s := range r.peersNow() {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == r.cfg.ID || answering(s.ID) {
			up++
		}
	}
	return voters, up
}

// leaderDown reports whether the broker of the leader this replica
// believes in is found down: the replica then names no leader (Metadata
// says LEADER_NOT_AVAILABLE, which clients re-ask about quickly) until a
// new one reaches it.
func (r *Replica) leaderDown(id raft.ServerID) bool {
	return id != "" && r.peerIsDown(id)
}

// NoQuorum reports whether this replica serves no leader and a majority
// of its group's voters (itself counted as up) are on brokers that do not
// answer (a broker that restarted a moment ago answers): the partition
// cannot elect a leader until they return, as opposed to a leader
// moving, which takes about a second. It
// counts the voters of Peers (the group's configuration as placed; asking
// Raft would be a round trip through its main loop on an error path).
func (r *Replica) NoQuorum() bool {
	if r.peers == nil || r.ready() {
		return false
	}
	voters, up := r.votersUp(r.peers.PeerAnswering)
	return voters > 0 && up < voters/2+1
}

// progressReporter is a transport that tells a leader how far each
// follower's log is (transport.GroupTransport.PeerLastLog).
type progressReporter interface {
	PeerLastLog(id raft.ServerID) (index uint64, at time.Time, ok bool)
}

// outOfSyncReporter is a transport that tells a leader how long a
// follower has not held its whole log (transport.GroupTransport.PeerOutOfSync).
type outOfSyncReporter interface {
	PeerOutOfSync(id raft.ServerID) time.Duration
}

// FollowerOutOfSync is how long follower id has not held every entry
// this leader held (Kafka's in-sync test, see PeerOutOfSync); 0 if it
// never answered, or without such reports (another transport).
func (r *Replica) FollowerOutOfSync(id raft.ServerID) time.Duration {
	if p, ok := r.cfg.Transport.(outOfSyncReporter); ok {
		return p.PeerOutOfSync(id)
	}
	return 0
}

// ReplicaLagMax is how long a follower may go without holding its
// leader's whole log and still count as in sync: Kafka's
// replica.lag.time.max.ms default.
const ReplicaLagMax = 30 * time.Second

// InSync reports whether the replica on broker node counts as in sync,
// Kafka's ISR, as far as this broker can tell: it must be a voter of the
// group's configuration (a replica still joining in a move is not); this
// broker's own replica is; another broker's is while its broker answers
// the transport's probe, and, where this replica leads, while it has not
// gone ReplicaLagMax without holding the whole log (FollowerOutOfSync). A
// follower cannot see the others' progress, so on a broker that does not
// lead, only a dead broker drops out.
func (r *Replica) InSync(node int) bool {
	s, ok := r.serverOn(node)
	if !ok || s.Suffrage != raft.Voter {
		return false
	}
	if s.ID == r.cfg.ID {
		return true
	}
	down := r.peerIsDown(s.ID)
	leads := r.ready()
	var behind time.Duration
	if leads {
		behind = r.FollowerOutOfSync(s.ID)
	}
	return followerInSync(down, leads, behind)
}

// followerInSync is InSync's rule for another broker's voter: its broker
// answers, and, seen from the leader, it has not gone longer than
// ReplicaLagMax without the leader's whole log (outOfSync).
func followerInSync(down, leads bool, outOfSync time.Duration) bool {
	return !down && (!leads || outOfSync <= ReplicaLagMax)
}

// Offline reports whether the replica on broker node is on another
// broker that this broker's transport finds down: Kafka's offline
// replicas, which Metadata lists beside the ISR.
func (r *Replica) Offline(node int) bool {
	s, ok := r.serverOn(node)
	return ok && s.ID != r.cfg.ID && r.peerIsDown(s.ID)
}

// serverOn is the member of the group's configuration (peersNow) on
// broker node, if any.
func (r *Replica) serverOn(node int) (raft.Server, bool) {
	for _, s := range r.peersNow() {
		if n, ok := r.cfg.NodeID(s.ID); ok && n == node {
			return s, true
		}
	}
	return raft.Server{}, false
}

// transferLag is how many entries behind the leader's last one a
// follower may be and still count as caught up for a leadership transfer:
// the pipeline's window, entries already on their way.
const transferLag = 2

// caughtUp reports whether follower id answered an AppendEntries lately
// with a log at most transferLag entries behind
// this leader's. LeadershipTransferToServer refuses every write until the
// target has caught up and won, so a transfer to a follower far behind
// (a broker back from a long stop, with a backlog) would be an outage as
// long as its catch-up; maybeTransfer waits until replication has caught
// it up instead. Without progress reports (another transport) it is true.
func (r *Replica) caughtUp(id raft.ServerID) bool {
	p, ok := r.cfg.Transport.(progressReporter)
	if !ok {
		return true
	}
	last, at, ok := p.PeerLastLog(id)
	// Fresh: newer than two heartbeat intervals (an idle follower answers
	// only those) or two check intervals.
	if !ok || time.Since(at) > 2*max(r.cfg.CheckInterval, r.cfg.Raft.HeartbeatTimeout/5) {
		return false
	}
	return last+transferLag >= r.raft.LastIndex()
}
