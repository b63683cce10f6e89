package partition

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/transport"
)

// Replica moves: the leader converges its group's Raft configuration
// toward a target replica set (SetTarget), one configuration change per
// check interval. See DESIGN.md, "Replica moves".

// confView is the latest Raft configuration the monitor read, with its
// log index.
type confView struct {
	servers []raft.Server
	index   uint64
}

// memberState is the replica's part of a move; its fields are atomics or
// guarded by Replica.mu.
type memberState struct {
	// conf is the latest configuration the monitor read (checkRemoved).
	conf atomic.Pointer[confView]
	// target is the replica set SetTarget asked for; nil: none asked, the
	// configuration stays what it is. Guarded by Replica.mu.
	target []raft.Server
}

// SetTarget sets the replica set the group converges to: servers in
// preference order (the first is the preferred leader), each a voter at
// the end. While this replica leads, its monitor adds the missing ones as
// non-voters, promotes them once caught up, hands leadership to the first
// caught-up one if this replica is not in the set, and removes the others,
// never leaving fewer voters than the set has. An empty set is ignored.
func (r *Replica) SetTarget(servers []raft.Server) {
	if len(servers) == 0 {
		return
	}
	t := slices.Clone(servers)
	r.mu.Lock()
	r.member.target = t
	r.mu.Unlock()
	if w, ok := r.cfg.Transport.(peerWatcher); ok {
		w.WatchPeers(t)
	}
}

// peersNow is the group's voters in preference order: the voters of the
// latest configuration the monitor read, those the wanted membership (the
// target, or Peers before one was set) names first and in its order, then
// the others in the configuration's order; the wanted membership itself
// before the first read. A dead leader's followers rank themselves in it
// (onPeerDown) and NoQuorum counts it, so it must hold exactly the
// servers that can campaign and vote: during a move the target names
// joiners that are not voters yet and omits the old voters, and ranking
// by it gave every old voter the same rank (the number of live target
// brokers), so they campaigned at the same moment, split the vote and
// waited out Raft's election timeout. When the configuration is the
// target (no move under way) the first is the target's first, the
// preferred leader (maybeTransfer).
func (r *Replica) peersNow() []raft.Server {
	r.mu.Lock()
	wanted := r.member.target
	if wanted == nil {
		wanted = r.cfg.Peers
	}
	r.mu.Unlock()
	c := r.member.conf.Load()
	if c == nil {
		return wanted
	}
	return votersByPreference(c.servers, wanted)
}

// votersByPreference is the voters of servers, those wanted names first
// in wanted's order, then the rest in servers' order; wanted itself if
// servers has no voter.
func votersByPreference(servers, wanted []raft.Server) []raft.Server {
	out := make([]raft.Server, 0, len(servers))
	isVoter := func(id raft.ServerID) (raft.Server, bool) {
		i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == id && s.Suffrage == raft.Voter })
		if i < 0 {
			return raft.Server{}, false
		}
		return servers[i], true
	}
	for _, w := range wanted {
		if s, ok := isVoter(w.ID); ok && !slices.ContainsFunc(out, func(o raft.Server) bool { return o.ID == s.ID }) {
			out = append(out, s)
		}
	}
	for _, s := range servers {
		if s.Suffrage == raft.Voter && !slices.ContainsFunc(out, func(o raft.Server) bool { return o.ID == s.ID }) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return wanted
	}
	return out
}

// noteConfiguration records the configuration the monitor just read.
func (r *Replica) noteConfiguration(f raft.ConfigurationFuture) {
	r.member.conf.Store(&confView{servers: f.Configuration().Servers, index: f.Index()})
}

// Membership returns the voters and non-voters of the latest Raft
// configuration this replica holds (committed or not), as of its last
// check, by server id; both nil before the first check.
func (r *Replica) Membership() (voters, nonvoters []raft.ServerID) {
	c := r.member.conf.Load()
	if c == nil {
		return nil, nil
	}
	for _, s := range c.servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
		} else {
			nonvoters = append(nonvoters, s.ID)
		}
	}
	return voters, nonvoters
}

// Joiner is one non-voter's distance from this leader.
type Joiner struct {
	ID            raft.ServerID
	EntriesBehind uint64
	BytesBehind   int64
}

// Joining reports, on the serving leader, how far behind it each non-voter
// of its configuration is: Raft entries between the non-voter's last
// reported log index and this leader's last, and the log bytes between
// the Kafka offset of that index and this leader's log end (the whole log
// for a non-voter that has reported nothing yet, or only a log before this
// leader's entries: it is still to be seeded). Nil on other replicas.
func (r *Replica) Joining() []Joiner {
	c := r.member.conf.Load()
	if c == nil || !r.ready() {
		return nil
	}
	var out []Joiner
	last := r.raft.LastIndex()
	l := r.store.Log()
	end := l.NextOffset()
	for _, s := range c.servers {
		if s.Suffrage == raft.Voter || s.ID == r.cfg.ID {
			continue
		}
		j := Joiner{ID: s.ID, EntriesBehind: last, BytesBehind: l.Size()}
		if p, ok := r.cfg.Transport.(progressReporter); ok {
			if idx, _, ok := p.PeerLastLog(s.ID); ok && idx > 0 {
				j.EntriesBehind = last - min(idx, last)
				if off, ok := r.store.KafkaOffsetThrough(idx); ok && off <= end {
					if b, err := l.BytesBetween(max(off, l.LogStartOffset()), end); err == nil {
						j.BytesBehind = b
					}
				}
			}
		}
		out = append(out, j)
	}
	return out
}

// NodeOf maps a server id to its broker node id with the replica's NodeID
// function.
func (r *Replica) NodeOf(id raft.ServerID) (int, bool) { return r.cfg.NodeID(id) }

// moving reports whether a target is set and the configuration differs
// from it (a member missing, a non-voter, or a member too many).
func (r *Replica) moving() bool {
	r.mu.Lock()
	target := r.member.target
	r.mu.Unlock()
	c := r.member.conf.Load()
	if target == nil || c == nil {
		return false
	}
	if len(c.servers) != len(target) {
		return true
	}
	for _, t := range target {
		if !slices.ContainsFunc(c.servers, func(s raft.Server) bool { return s.ID == t.ID && s.Suffrage == raft.Voter }) {
			return true
		}
	}
	return false
}

// converge takes one step toward the target on the serving leader: the
// first that applies of add a missing target member as a non-voter,
// promote a caught-up target non-voter, hand leadership to a caught-up
// target voter once every target member is a voter and this replica is
// not one of them, remove a member not in the target (a non-voter at any
// time, a voter only once every target member is a voter, so the voters
// never number fewer than the target). One change at a time:
// hashicorp/raft refuses a second while one is uncommitted, and every
// change names the configuration index it was computed from.
func (r *Replica) converge() {
	if !r.ready() {
		return
	}
	r.mu.Lock()
	target := r.member.target
	r.mu.Unlock()
	c := r.member.conf.Load()
	if target == nil || c == nil || len(c.servers) == 0 {
		return
	}
	member := func(id raft.ServerID) (raft.Server, bool) {
		i := slices.IndexFunc(c.servers, func(s raft.Server) bool { return s.ID == id })
		if i < 0 {
			return raft.Server{}, false
		}
		return c.servers[i], true
	}
	inTarget := func(id raft.ServerID) bool {
		return slices.ContainsFunc(target, func(s raft.Server) bool { return s.ID == id })
	}
	log := r.cfg.Logger
	timeout := r.cfg.ApplyTimeout
	// a. Missing target members join as non-voters.
	for _, t := range target {
		if _, ok := member(t.ID); !ok {
			log.Info("replica move: adding non-voter", "replica", r.cfg.ID, "add", t.ID, "configuration", confString(c))
			r.change("add non-voter", t.ID, r.raft.AddNonvoter(t.ID, t.Address, c.index, timeout))
			return
		}
	}
	// b. Caught-up target non-voters become voters.
	allVoters := true
	for _, t := range target {
		s, _ := member(t.ID)
		if s.Suffrage == raft.Voter {
			continue
		}
		allVoters = false
		if r.joinerCaughtUp(t.ID) {
			log.Info("replica move: promoting caught-up non-voter", "replica", r.cfg.ID, "promote", t.ID, "configuration", confString(c))
			r.change("promote", t.ID, r.raft.AddVoter(t.ID, s.Address, c.index, timeout))
			return
		}
	}
	// Non-voters no longer wanted (a cancelled move) go at any time: they
	// count toward no majority.
	for _, s := range c.servers {
		if s.Suffrage != raft.Voter && !inTarget(s.ID) && s.ID != r.cfg.ID {
			log.Info("replica move: removing unwanted non-voter", "replica", r.cfg.ID, "remove", s.ID, "configuration", confString(c))
			r.change("remove non-voter", s.ID, r.raft.RemoveServer(s.ID, c.index, timeout))
			return
		}
	}
	if !allVoters {
		return
	}
	// c. Leadership to the target before the last old voter leaves.
	if !inTarget(r.cfg.ID) {
		for _, t := range target {
			if r.caughtUp(t.ID) && !r.peerIsDown(t.ID) {
				s, _ := member(t.ID)
				log.Info("replica move: handing leadership to a target voter", "replica", r.cfg.ID, "to", t.ID, "configuration", confString(c))
				if stopped, err := r.await(r.raft.LeadershipTransferToServer(t.ID, s.Address)); !stopped && err != nil {
					log.Info("replica move: leadership transfer failed; retrying", "replica", r.cfg.ID, "to", t.ID, "error", err)
				}
				return
			}
		}
		return
	}
	// d. Voters not in the target leave; the target members are all
	// voters, so at least len(target) remain.
	for _, s := range c.servers {
		if !inTarget(s.ID) {
			log.Info("replica move: removing replica not in the target", "replica", r.cfg.ID, "remove", s.ID, "configuration", confString(c))
			r.change("remove", s.ID, r.raft.RemoveServer(s.ID, c.index, timeout))
			return
		}
	}
}

// change waits for a configuration change and logs its failure; the next
// check retries from the configuration then current.
func (r *Replica) change(what string, id raft.ServerID, f raft.IndexFuture) {
	if stopped, err := r.await(f); !stopped && err != nil {
		r.cfg.Logger.Info("replica move: configuration change failed; retrying", "replica", r.cfg.ID, "change", what, "server", id, "error", err)
		return
	}
	// Read the new configuration at once, so the next step (and the
	// report) starts from it.
	g := r.raft.GetConfiguration()
	if stopped, err := r.await(g); !stopped && err == nil {
		r.noteConfiguration(g)
	}
}

// joinerCaughtUp reports whether a non-voter may be promoted: it answered
// lately with a log at most transferLag entries behind this leader's
// (caughtUp) and past this leader's latest snapshot, so it holds entries
// after any snapshot it was sent and is no longer being seeded (a seeding
// replica answers heartbeats with its snapshot's index and refuses every
// entry until its copy is installed). A leader whose log ends at its
// snapshot appends a barrier so that a joiner can show it is past it.
func (r *Replica) joinerCaughtUp(id raft.ServerID) bool {
	if !r.caughtUp(id) {
		return false
	}
	var snap uint64
	if metas, err := r.snaps.List(); err == nil && len(metas) > 0 {
		snap = metas[0].Index
	}
	p, ok := r.cfg.Transport.(progressReporter)
	if !ok {
		return true
	}
	last, _, _ := p.PeerLastLog(id)
	if last > snap {
		return true
	}
	if r.raft.LastIndex() <= snap+transferLag {
		_, _ = r.await(r.raft.Barrier(r.cfg.ApplyTimeout))
	}
	return false
}

// peerIsDown reports whether the transport finds id's broker down.
func (r *Replica) peerIsDown(id raft.ServerID) bool {
	return r.peers != nil && r.peers.PeerDown(id)
}

// confString renders a configuration for the move's log lines, e.g.
// "1 2 3 4(nonvoter)". (hashicorp/raft's GetConfiguration gives no index:
// the changes pass 0, no check, as prevIndex.)
func confString(c *confView) string {
	var b []byte
	for i, s := range c.servers {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, s.ID...)
		if s.Suffrage != raft.Voter {
			b = append(b, "(nonvoter)"...)
		}
	}
	return string(b)
}

// LeftGroup reports whether a majority of the members of the last target
// this replica was given refuse it as a member of the group
// (transport.ErrRefused: their configurations no longer list it). A
// leaving replica whose removal never reached it (the leader stops
// replicating to a removed server after one best-effort attempt) still
// holds a configuration naming it a voter; this asks the group instead.
// False without a target, or if fewer than a majority answer so.
func (r *Replica) LeftGroup(ctx context.Context) bool {
	p, ok := r.cfg.Transport.(segmentPeer)
	r.mu.Lock()
	target := r.member.target
	r.mu.Unlock()
	if !ok || len(target) == 0 {
		return false
	}
	refused := 0
	for _, s := range target {
		if s.ID == r.cfg.ID {
			return false // still wanted here
		}
		if _, _, err := p.SegmentList(ctx, s.ID, s.Address, 0, 0); errors.Is(err, transport.ErrRefused) {
			refused++
		}
	}
	return refused >= len(target)/2+1
}
