package groups

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sort"
	"sync"
	"time"
)

// group is one consumer group's state machine: Kafka's classic protocol.
// It does no I/O and reads no clock: every call passes now, and tick
// moves timers. Its owner (a shard) serializes every call with its lock.
// Calls that must wait for a rebalance get a channel the group answers
// on, buffered so the group never blocks.
type group struct {
	tenant, name string
	initialDelay time.Duration

	state        string
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	instances    map[string]string    // instance id → member id
	pending      map[string]time.Time // KIP-394 member ids handed out → expiry
	seq          uint64               // join order, for choosing a leader

	// PreparingRebalance: complete at rebalanceDeadline at the latest;
	// not before initialDeadline (the initial rebalance delay).
	rebalanceDeadline, initialDeadline time.Time
	// CompletingRebalance: members that have not synced by syncDeadline
	// are removed.
	syncDeadline time.Time
	// leaderSyncing: the leader's assignment is being written.
	leaderSyncing bool

	offsets map[TopicPartition]Committed
	// lastCommit is the newest CommittedAt of offsets ever set (deleted
	// ones included): the group's last sign of use.
	lastCommit time.Time
	// emptySince is when the coordinator first saw the group Empty,
	// without members or pending joins; zero while it has them.
	emptySince time.Time
	// expiring: the group's offsets are being expired (expireOffsets);
	// after a failed try, not again before retryExpiry.
	expiring    bool
	retryExpiry time.Time

	// emptied: the group became Empty with a new generation that is not
	// written yet; the coordinator writes it (persistEmptied).
	emptied bool

	// busy counts calls between their start and end of a write to the
	// offsets partition; a busy group is never dropped as empty.
	busy int
	// wmu serializes the group's writes, so that the log's order of its
	// records is the order their effects are applied in memory. Taken
	// before the shard's lock, never while holding it.
	wmu sync.Mutex
}

type member struct {
	id, instanceID, clientID, clientHost string
	protocolType                         string
	protocols                            []Protocol
	session, rebalance                   time.Duration
	lastHeartbeat                        time.Time
	seq                                  uint64
	joined                               bool // rejoined during this PreparingRebalance
	joinWait                             chan joinOutcome
	syncWait                             chan syncOutcome
	synced                               bool
	assignment                           []byte
}

type joinOutcome struct {
	res JoinResult
	err error
}

type syncOutcome struct {
	assignment []byte
	err        error
}

func newGroup(tenant, name string, initialDelay time.Duration) *group {
	return &group{tenant: tenant, name: name, initialDelay: initialDelay, state: StateEmpty,
		members: map[string]*member{}, instances: map[string]string{}, pending: map[string]time.Time{},
		offsets: map[TopicPartition]Committed{}}
}

// newMemberID is a client id and a random suffix, as Kafka's.
func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if len(clientID) > 128 {
		clientID = clientID[:128]
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

// setOffset records a committed offset.
func (g *group) setOffset(tp TopicPartition, c Committed) {
	g.offsets[tp] = c
	if c.CommittedAt.After(g.lastCommit) {
		g.lastCommit = c.CommittedAt
	}
}

// empty reports whether the group holds nothing worth keeping.
func (g *group) empty() bool {
	return g.state == StateEmpty && len(g.members) == 0 && len(g.offsets) == 0 && len(g.pending) == 0 && g.busy == 0
}

// supports reports whether every member supports one of protos.
func (g *group) supports(protocolType string, protos []Protocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, c := range g.candidates() {
		for _, p := range protos {
			if p.Name == c {
				return true
			}
		}
	}
	return false
}

// candidates are the protocols every member supports.
func (g *group) candidates() []string {
	var out []string
	first := true
	for _, m := range g.members {
		var names []string
		for _, p := range m.protocols {
			names = append(names, p.Name)
		}
		if first {
			out, first = names, false
			continue
		}
		out = slices.DeleteFunc(out, func(n string) bool { return !slices.Contains(names, n) })
	}
	return out
}

// selectProtocol is Kafka's vote: each member votes for its most
// preferred candidate; the most votes win (ties by name).
func (g *group) selectProtocol() string {
	cands := g.candidates()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	sort.Strings(cands)
	best := ""
	for _, c := range cands {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

// result is the join answer of m for the current generation.
func (g *group) result(m *member) JoinResult {
	r := JoinResult{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, LeaderID: g.leader, MemberID: m.id}
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			r.Members = append(r.Members, Member{MemberID: o.id, InstanceID: o.instanceID, ClientID: o.clientID,
				ClientHost: o.clientHost, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// join handles a JoinGroup. It returns either an answer now (res or err)
// or a channel that gets the answer when the rebalance completes.
func (g *group) join(now time.Time, r JoinRequest) (JoinResult, <-chan joinOutcome, error) {
	if r.ProtocolType == "" || len(r.Protocols) == 0 || !g.supports(r.ProtocolType, r.Protocols) {
		return JoinResult{MemberID: r.MemberID}, nil, ErrInconsistentProtocol
	}
	if r.MemberID == "" {
		id := newMemberID(r.ClientID)
		if r.InstanceID != "" {
			if old, ok := g.instances[r.InstanceID]; ok {
				return g.replaceStatic(now, g.members[old], id, r)
			}
		} else if r.RequireKnownMemberID {
			g.pending[id] = now.Add(r.SessionTimeout)
			return JoinResult{MemberID: id}, nil, ErrMemberIDRequired
		}
		return g.addMember(now, id, r)
	}
	m, ok := g.members[r.MemberID]
	if !ok {
		if _, ok := g.pending[r.MemberID]; ok && r.InstanceID == "" {
			delete(g.pending, r.MemberID)
			return g.addMember(now, r.MemberID, r)
		}
		if cur, ok := g.instances[r.InstanceID]; ok && r.InstanceID != "" && cur != r.MemberID {
			return JoinResult{MemberID: r.MemberID}, nil, ErrFencedInstance
		}
		return JoinResult{MemberID: r.MemberID}, nil, ErrUnknownMember
	}
	if m.instanceID != r.InstanceID {
		if r.InstanceID != "" {
			return JoinResult{MemberID: r.MemberID}, nil, ErrFencedInstance
		}
		return JoinResult{MemberID: r.MemberID}, nil, ErrUnknownMember
	}
	changed := !sameProtocols(m.protocols, r.Protocols)
	g.update(now, m, r)
	switch g.state {
	case StateCompletingRebalance:
		if !changed {
			return g.result(m), nil, nil
		}
	case StateStable:
		if !changed && m.id != g.leader {
			return g.result(m), nil, nil
		}
	}
	return g.await(now, m)
}

func (g *group) update(now time.Time, m *member, r JoinRequest) {
	m.protocolType, m.protocols = r.ProtocolType, r.Protocols
	m.session, m.rebalance = r.SessionTimeout, r.RebalanceTimeout
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.lastHeartbeat = now
}

func (g *group) addMember(now time.Time, id string, r JoinRequest) (JoinResult, <-chan joinOutcome, error) {
	g.seq++
	m := &member{id: id, instanceID: r.InstanceID, seq: g.seq}
	g.update(now, m, r)
	if len(g.members) == 0 {
		g.protocolType = r.ProtocolType
	}
	g.members[id] = m
	if r.InstanceID != "" {
		g.instances[r.InstanceID] = id
	}
	if g.state == StatePreparingRebalance && now.Before(g.initialDeadline) {
		// Still in the initial delay: give the next member as long again.
		g.initialDeadline = minTime(now.Add(g.initialDelay), g.rebalanceDeadline)
	}
	return g.await(now, m)
}

// replaceStatic gives a rejoining static member a new member id; the old
// id is fenced. A follower of a stable group keeps its assignment without
// a rebalance; anything else rebalances.
func (g *group) replaceStatic(now time.Time, m *member, id string, r JoinRequest) (JoinResult, <-chan joinOutcome, error) {
	old := m.id
	m.failWaits(ErrFencedInstance)
	delete(g.members, old)
	m.id = id
	g.members[id] = m
	g.instances[r.InstanceID] = id
	wasLeader := g.leader == old
	if wasLeader {
		g.leader = id
	}
	changed := !sameProtocols(m.protocols, r.Protocols)
	g.update(now, m, r)
	if g.state == StateStable && !changed && !wasLeader {
		return g.result(m), nil, nil
	}
	return g.await(now, m)
}

// await makes m wait for the rebalance, starting one if none is under
// way.
func (g *group) await(now time.Time, m *member) (JoinResult, <-chan joinOutcome, error) {
	if g.state != StatePreparingRebalance {
		g.prepareRebalance(now)
	}
	if m.joinWait != nil {
		// A second join of the same member replaces the first.
		m.joinWait <- joinOutcome{res: JoinResult{MemberID: m.id}, err: ErrRebalanceInProgress}
	}
	ch := make(chan joinOutcome, 1)
	m.joinWait, m.joined = ch, true
	g.tryComplete(now)
	return JoinResult{}, ch, nil
}

// prepareRebalance starts a rebalance: every member must join again
// within the largest rebalance timeout.
func (g *group) prepareRebalance(now time.Time) {
	initial := g.state == StateEmpty
	if g.state == StateCompletingRebalance {
		g.failSyncs(ErrRebalanceInProgress)
	}
	g.state = StatePreparingRebalance
	g.leaderSyncing = false
	var longest time.Duration
	for _, m := range g.members {
		m.joined = m.joinWait != nil
		longest = max(longest, m.rebalance)
	}
	g.rebalanceDeadline = now.Add(longest)
	g.initialDeadline = now
	if initial {
		g.initialDeadline = minTime(now.Add(g.initialDelay), g.rebalanceDeadline)
	}
}

func (g *group) failSyncs(err error) {
	for _, m := range g.members {
		if m.syncWait != nil {
			m.syncWait <- syncOutcome{err: err}
			m.syncWait = nil
		}
	}
}

// tryComplete ends a PreparingRebalance once every member joined (after
// the initial delay) or the rebalance timeout passed: members that did
// not join are removed, the generation advances, and every joined member
// gets its answer.
func (g *group) tryComplete(now time.Time) bool {
	if g.state != StatePreparingRebalance {
		return false
	}
	all := true
	for _, m := range g.members {
		all = all && m.joined
	}
	if !(all && !now.Before(g.initialDeadline)) && now.Before(g.rebalanceDeadline) {
		return false
	}
	for _, m := range g.members {
		if !m.joined {
			g.remove(m)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = StateEmpty, "", ""
		g.emptied = true
		return true
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = StateCompletingRebalance
	var longest time.Duration
	for _, m := range g.members {
		longest = max(longest, m.rebalance)
	}
	g.syncDeadline = now.Add(longest)
	for _, m := range g.members {
		m.lastHeartbeat, m.synced, m.assignment = now, false, nil
		if m.joinWait != nil {
			m.joinWait <- joinOutcome{res: g.result(m)}
			m.joinWait = nil
		}
	}
	return true
}

// failWaits answers m's waiting join and sync calls, if any, with err:
// the member is gone (removed, fenced, or its coordinator unloaded).
func (m *member) failWaits(err error) {
	if m.joinWait != nil {
		m.joinWait <- joinOutcome{res: JoinResult{MemberID: m.id}, err: err}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- syncOutcome{err: err}
		m.syncWait = nil
	}
}

// remove drops m, answering its waits.
func (g *group) remove(m *member) {
	m.failWaits(ErrUnknownMember)
	delete(g.members, m.id)
	if m.instanceID != "" && g.instances[m.instanceID] == m.id {
		delete(g.instances, m.instanceID)
	}
}

// removeAndRebalance removes m and rebalances the rest.
func (g *group) removeAndRebalance(now time.Time, m *member) {
	g.remove(m)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		g.prepareRebalance(now)
		g.tryComplete(now)
	case StatePreparingRebalance:
		g.tryComplete(now)
	}
}

// member checks a member id and instance id as sync, heartbeat and commit
// do.
func (g *group) member(memberID, instanceID string) (*member, error) {
	if instanceID != "" {
		if cur, ok := g.instances[instanceID]; ok && cur != memberID {
			return nil, ErrFencedInstance
		}
	}
	m, ok := g.members[memberID]
	if !ok || m.instanceID != instanceID {
		return nil, ErrUnknownMember
	}
	return m, nil
}

// syncStep is what a SyncGroup needs from its caller.
type syncStep struct {
	assignment []byte             // answer now
	wait       <-chan syncOutcome // or wait for this
	persist    *groupRecord       // the leader's assignment to write first
}

// sync handles a SyncGroup. The leader's call in CompletingRebalance
// returns the record to persist; the caller writes it, then calls
// assigned (or syncFailed).
func (g *group) sync(now time.Time, memberID, instanceID string, generation int32, assignments map[string][]byte) (syncStep, error) {
	m, err := g.member(memberID, instanceID)
	if err != nil {
		return syncStep{}, err
	}
	if generation != g.generation {
		return syncStep{}, ErrIllegalGeneration
	}
	m.lastHeartbeat = now
	switch g.state {
	case StatePreparingRebalance:
		return syncStep{}, ErrRebalanceInProgress
	case StateStable:
		return syncStep{assignment: m.assignment}, nil
	case StateCompletingRebalance:
	default:
		return syncStep{}, ErrUnknownMember
	}
	m.synced = true
	if m.syncWait != nil {
		m.syncWait <- syncOutcome{err: ErrRebalanceInProgress}
	}
	ch := make(chan syncOutcome, 1)
	m.syncWait = ch
	step := syncStep{wait: ch}
	if m.id == g.leader && !g.leaderSyncing {
		g.leaderSyncing = true
		rec := g.record()
		for i := range rec.members {
			rec.members[i].assignment = assignments[rec.members[i].id]
		}
		step.persist = &rec
	}
	return step, nil
}

// record is the group's persisted form.
func (g *group) record() groupRecord {
	rec := groupRecord{protocolType: g.protocolType, protocol: g.protocol, generation: g.generation, leader: g.leader}
	for _, m := range g.sortedMembers() {
		rec.members = append(rec.members, memberRecord{id: m.id, instanceID: m.instanceID, clientID: m.clientID,
			clientHost: m.clientHost, session: m.session, rebalance: m.rebalance,
			metadata: m.metadataFor(g.protocol), assignment: m.assignment})
	}
	return rec
}

// assigned completes the rebalance of generation with the leader's
// written assignment: the group is Stable and every waiting member gets
// its part. It does nothing if the group moved on meanwhile.
func (g *group) assigned(now time.Time, rec groupRecord) {
	if g.state != StateCompletingRebalance || g.generation != rec.generation || !g.leaderSyncing {
		return
	}
	byID := map[string][]byte{}
	for _, mr := range rec.members {
		byID[mr.id] = mr.assignment
	}
	g.state, g.leaderSyncing = StateStable, false
	for _, m := range g.members {
		m.assignment = byID[m.id]
		if m.syncWait != nil {
			m.syncWait <- syncOutcome{assignment: m.assignment}
			m.syncWait = nil
		}
	}
}

// syncFailed answers the members waiting on a leader's sync whose write
// failed.
func (g *group) syncFailed(rec groupRecord, err error) {
	if g.state != StateCompletingRebalance || g.generation != rec.generation {
		return
	}
	g.leaderSyncing = false
	g.failSyncs(err)
}

// heartbeat handles a Heartbeat.
func (g *group) heartbeat(now time.Time, memberID, instanceID string, generation int32) error {
	if g.state == StateEmpty {
		return ErrUnknownMember
	}
	m, err := g.member(memberID, instanceID)
	if err != nil {
		return err
	}
	if generation != g.generation {
		return ErrIllegalGeneration
	}
	m.lastHeartbeat = now
	if g.state == StatePreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// leave removes one member (by member id, instance id or both).
func (g *group) leave(now time.Time, id MemberIdentity) error {
	var m *member
	if id.InstanceID != "" {
		cur, ok := g.instances[id.InstanceID]
		switch {
		case !ok:
			return ErrUnknownMember
		case id.MemberID != "" && cur != id.MemberID:
			return ErrFencedInstance
		}
		m = g.members[cur]
	} else {
		if _, ok := g.pending[id.MemberID]; ok {
			delete(g.pending, id.MemberID)
			return nil
		}
		var ok bool
		if m, ok = g.members[id.MemberID]; !ok || m.instanceID != "" {
			return ErrUnknownMember
		}
	}
	if m == nil {
		return ErrUnknownMember
	}
	g.removeAndRebalance(now, m)
	return nil
}

// checkCommit decides whether a member may commit offsets now.
func (g *group) checkCommit(now time.Time, memberID, instanceID string, generation int32) error {
	if instanceID != "" {
		if cur, ok := g.instances[instanceID]; ok && cur != memberID {
			return ErrFencedInstance
		}
	}
	if generation < 0 && memberID == "" && instanceID == "" && g.state == StateEmpty {
		return nil // a simple consumer or admin tool: the group only stores offsets
	}
	if g.state == StateCompletingRebalance {
		return ErrRebalanceInProgress
	}
	m, ok := g.members[memberID]
	if !ok || m.instanceID != instanceID {
		return ErrUnknownMember
	}
	if generation != g.generation {
		return ErrIllegalGeneration
	}
	m.lastHeartbeat = now
	return nil
}

// tick expires pending member ids and sessions, and ends rebalances
// whose time is up.
func (g *group) tick(now time.Time) {
	for id, exp := range g.pending {
		if now.After(exp) {
			delete(g.pending, id)
		}
	}
	for _, m := range g.sortedMembers() {
		if g.state == StatePreparingRebalance && m.joined {
			continue // waiting for the rebalance, not for heartbeats
		}
		if now.After(m.lastHeartbeat.Add(m.session)) {
			g.removeAndRebalance(now, m)
		}
	}
	switch g.state {
	case StatePreparingRebalance:
		g.tryComplete(now)
	case StateCompletingRebalance:
		if !g.leaderSyncing && now.After(g.syncDeadline) {
			for _, m := range g.sortedMembers() {
				if !m.synced {
					g.remove(m)
				}
			}
			g.prepareRebalance(now)
			g.tryComplete(now)
		}
	}
}

// restore sets the group from its persisted record, on load. Members'
// sessions start at now.
func (g *group) restore(now time.Time, rec groupRecord) {
	for _, m := range g.members {
		g.remove(m)
	}
	g.protocolType, g.protocol, g.generation, g.leader = rec.protocolType, rec.protocol, rec.generation, rec.leader
	g.state = StateEmpty
	for _, mr := range rec.members {
		g.seq++
		m := &member{id: mr.id, instanceID: mr.instanceID, clientID: mr.clientID, clientHost: mr.clientHost,
			protocolType: rec.protocolType, protocols: []Protocol{{Name: rec.protocol, Metadata: mr.metadata}},
			session: mr.session, rebalance: mr.rebalance, lastHeartbeat: now, seq: g.seq, synced: true, assignment: mr.assignment}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.instances[m.instanceID] = m.id
		}
	}
	if len(g.members) > 0 {
		g.state = StateStable
	} else {
		g.protocol, g.leader = "", ""
	}
}

// describe is DescribeGroup's view.
func (g *group) describe() GroupDescription {
	d := GroupDescription{GroupSummary: GroupSummary{Group: g.name, ProtocolType: g.protocolType, State: g.state},
		Protocol: g.protocol, Generation: g.generation}
	for _, m := range g.sortedMembers() {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: m.metadataFor(g.protocol)}
		if g.state == StateStable {
			md.Assignment = m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
