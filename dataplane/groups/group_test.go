package groups

import (
	"errors"
	"testing"
	"time"
)

// scenario drives one group's state machine with a scripted clock.
type scenario struct {
	t   *testing.T
	g   *group
	now time.Time
}

func newScenario(t *testing.T, delay time.Duration) *scenario {
	return &scenario{t: t, g: newGroup("tenant-a", "g", delay), now: time.Unix(1_700_000_000, 0)}
}

func (s *scenario) advance(d time.Duration) {
	s.now = s.now.Add(d)
	s.g.tick(s.now)
}

func joinReq(member, instance string, protos ...string) JoinRequest {
	r := JoinRequest{TenantID: "tenant-a", Group: "g", MemberID: member, InstanceID: instance, ClientID: "c",
		ProtocolType: "consumer", SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second}
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	for _, p := range protos {
		r.Protocols = append(r.Protocols, Protocol{Name: p, Metadata: []byte("md-" + p)})
	}
	return r
}

// join starts a join and returns its pending answer channel (nil if it
// was answered at once, with the answer).
func (s *scenario) join(r JoinRequest) (JoinResult, <-chan joinOutcome, error) {
	s.t.Helper()
	return s.g.join(s.now, r)
}

// joinTwo joins two new members (with these instance ids; "" for a
// dynamic member), lets the initial rebalance delay pass and returns both
// answers in join order.
func (s *scenario) joinTwo(instA, instB string) (joinOutcome, joinOutcome) {
	s.t.Helper()
	_, c0, _ := s.join(joinReq("", instA))
	_, c1, _ := s.join(joinReq("", instB))
	s.advance(s.g.initialDelay)
	return recv(s.t, c0), recv(s.t, c1)
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("no answer yet")
		var zero T
		return zero
	}
}

func pending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("answered early: %+v", v)
	default:
	}
}

// stable joins n dynamic members (KIP-394 style) and completes a
// rebalance with the leader's assignment; it returns the member ids,
// leader first.
func (s *scenario) stable(n int) []string {
	s.t.Helper()
	var chans []<-chan joinOutcome
	for range n {
		r := joinReq("", "")
		r.RequireKnownMemberID = true
		res, _, err := s.join(r)
		if !errors.Is(err, ErrMemberIDRequired) || res.MemberID == "" {
			s.t.Fatalf("first join: %+v %v, want a member id with ErrMemberIDRequired", res, err)
		}
		r.MemberID = res.MemberID
		_, ch, err := s.join(r)
		if err != nil || ch == nil {
			s.t.Fatalf("second join: %v", err)
		}
		chans = append(chans, ch)
	}
	s.advance(s.g.initialDelay)
	var ids []string
	var leader string
	for _, ch := range chans {
		o := recv(s.t, ch)
		if o.err != nil {
			s.t.Fatalf("join: %v", o.err)
		}
		leader = o.res.LeaderID
		ids = append(ids, o.res.MemberID)
	}
	for i, id := range ids {
		if id == leader {
			ids[0], ids[i] = ids[i], ids[0]
		}
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	step, err := s.g.sync(s.now, ids[0], "", s.g.generation, assign)
	if err != nil || step.persist == nil {
		s.t.Fatalf("leader sync: %+v %v", step, err)
	}
	s.g.assigned(s.now, *step.persist)
	if got := recv(s.t, step.wait); string(got.assignment) != "a-"+ids[0] {
		s.t.Fatalf("leader assignment %q", got.assignment)
	}
	if s.g.state != StateStable {
		s.t.Fatalf("state %s, want Stable", s.g.state)
	}
	return ids
}

func TestJoinSyncHeartbeatLeave(t *testing.T) {
	s := newScenario(t, 300*time.Millisecond)
	ids := s.stable(3)
	gen := s.g.generation
	if gen != 1 {
		t.Fatalf("generation %d, want 1", gen)
	}
	// A follower's sync in Stable gets its assignment at once.
	step, err := s.g.sync(s.now, ids[1], "", gen, nil)
	if err != nil || string(step.assignment) != "a-"+ids[1] {
		t.Fatalf("follower sync: %q %v", step.assignment, err)
	}
	if err := s.g.heartbeat(s.now, ids[2], "", gen); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := s.g.heartbeat(s.now, ids[2], "", gen-1); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	if err := s.g.heartbeat(s.now, "nobody", "", gen); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown heartbeat: %v", err)
	}
	// Leaving starts a rebalance; the others learn it from heartbeats.
	if err := s.g.leave(s.now, MemberIdentity{MemberID: ids[2]}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if s.g.state != StatePreparingRebalance {
		t.Fatalf("state %s after leave", s.g.state)
	}
	if err := s.g.heartbeat(s.now, ids[0], "", gen); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	// A commit of the old generation is still allowed while preparing
	// (cooperative consumers commit before they rejoin)...
	if err := s.g.checkCommit(s.now, ids[0], "", gen); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	_, c0, _ := s.join(joinReq(ids[0], ""))
	_, c1, _ := s.join(joinReq(ids[1], ""))
	o0, o1 := recv(t, c0), recv(t, c1)
	if o0.err != nil || o1.err != nil || o0.res.Generation != gen+1 || len(o0.res.Members)+len(o1.res.Members) != 2 {
		t.Fatalf("rejoin: %+v %+v", o0, o1)
	}
	// ...but not once the generation moved on.
	if err := s.g.checkCommit(s.now, ids[1], "", gen); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("commit while completing: %v", err)
	}
	step, _ = s.g.sync(s.now, o0.res.LeaderID, "", gen+1, map[string][]byte{ids[0]: {1}, ids[1]: {2}})
	s.g.assigned(s.now, *step.persist)
	if err := s.g.checkCommit(s.now, ids[1], "", gen); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("stale commit: %v", err)
	}
	if err := s.g.checkCommit(s.now, ids[1], "", gen+1); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := s.g.checkCommit(s.now, ids[2], "", gen+1); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("commit by departed member: %v", err)
	}
	if err := s.g.checkCommit(s.now, "", "", -1); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("admin commit to a group with members: %v", err)
	}
}

func TestSessionExpiry(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	ids := s.stable(2)
	gen := s.g.generation
	// Only ids[0] heartbeats.
	for range 4 {
		s.advance(3 * time.Second)
		if err := s.g.heartbeat(s.now, ids[0], "", gen); err != nil && !errors.Is(err, ErrRebalanceInProgress) {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if _, ok := s.g.members[ids[1]]; ok {
		t.Fatal("a member that stopped heartbeating for longer than its session timeout is still in the group")
	}
	if s.g.state != StatePreparingRebalance {
		t.Fatalf("state %s, want PreparingRebalance", s.g.state)
	}
	_, ch, _ := s.join(joinReq(ids[0], ""))
	if o := recv(t, ch); o.err != nil || o.res.Generation != gen+1 || len(o.res.Members) != 1 {
		t.Fatalf("rejoin: %+v", o)
	}
}

func TestRebalanceTimeoutRemovesLaggards(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	ids := s.stable(3)
	gen := s.g.generation
	_, ch, _ := s.join(joinReq(ids[0], "", "range", "roundrobin")) // new protocols → rebalance
	pending(t, ch)
	// ids[1] rejoins; ids[2] keeps heartbeating but never rejoins.
	_, ch1, _ := s.join(joinReq(ids[1], "", "range"))
	for range 9 {
		s.advance(3 * time.Second)
		_ = s.g.heartbeat(s.now, ids[2], "", gen)
		pending(t, ch)
	}
	s.advance(4 * time.Second) // past the 30 s rebalance timeout
	o := recv(t, ch)
	recv(t, ch1)
	if o.err != nil || o.res.Generation != gen+1 || o.res.Protocol != "range" {
		t.Fatalf("join: %+v", o)
	}
	if _, ok := s.g.members[ids[2]]; ok {
		t.Fatal("a member that did not rejoin within the rebalance timeout is still in the group")
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	s := newScenario(t, time.Second)
	_, c0, _ := s.join(joinReq("", ""))
	s.advance(600 * time.Millisecond)
	pending(t, c0)
	_, c1, _ := s.join(joinReq("", "")) // extends the delay by a second from now
	s.advance(600 * time.Millisecond)
	pending(t, c0)
	s.advance(500 * time.Millisecond)
	o0, o1 := recv(t, c0), recv(t, c1)
	if o0.res.Generation != 1 || o1.res.Generation != 1 || o0.res.LeaderID != o0.res.MemberID {
		t.Fatalf("joins: %+v %+v (the first member leads)", o0, o1)
	}
}

func TestStaticMembership(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	o0, o1 := s.joinTwo("inst-a", "inst-b")
	leader := o0.res.LeaderID
	step, _ := s.g.sync(s.now, leader, map[string]string{o0.res.MemberID: "inst-a", o1.res.MemberID: "inst-b"}[leader], 1,
		map[string][]byte{o0.res.MemberID: []byte("A"), o1.res.MemberID: []byte("B")})
	s.g.assigned(s.now, *step.persist)
	follower, finst, fwant := o1.res.MemberID, "inst-b", "B"
	if leader == follower {
		follower, finst, fwant = o0.res.MemberID, "inst-a", "A"
	}

	// The follower restarts: same instance id, no member id. It gets a new
	// member id, keeps its assignment, and no rebalance happens.
	res, ch, err := s.join(joinReq("", finst))
	if err != nil || ch != nil || res.MemberID == follower || res.Generation != 1 {
		t.Fatalf("static rejoin: %+v %v %v", res, ch, err)
	}
	if s.g.state != StateStable {
		t.Fatalf("state %s after a static follower's rejoin, want Stable", s.g.state)
	}
	step, err = s.g.sync(s.now, res.MemberID, finst, 1, nil)
	if err != nil || string(step.assignment) != fwant {
		t.Fatalf("sync after static rejoin: %q %v", step.assignment, err)
	}
	// The old member id is fenced everywhere.
	if err := s.g.heartbeat(s.now, follower, finst, 1); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("heartbeat with the replaced member id: %v", err)
	}
	if err := s.g.checkCommit(s.now, follower, finst, 1); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("commit with the replaced member id: %v", err)
	}
	if _, _, err := s.join(joinReq(follower, finst)); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("join with the replaced member id: %v", err)
	}
	if err := s.g.leave(s.now, MemberIdentity{MemberID: follower, InstanceID: finst}); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("leave with the replaced member id: %v", err)
	}
	// Leaving by instance id removes it and rebalances.
	if err := s.g.leave(s.now, MemberIdentity{InstanceID: finst}); err != nil {
		t.Fatalf("leave by instance id: %v", err)
	}
	if len(s.g.members) != 1 || s.g.state != StatePreparingRebalance {
		t.Fatalf("after leave: %d members, state %s", len(s.g.members), s.g.state)
	}
}

func TestMemberIDRequiredAndExpiry(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	r := joinReq("", "")
	r.RequireKnownMemberID = true
	res, _, err := s.join(r)
	if !errors.Is(err, ErrMemberIDRequired) {
		t.Fatalf("first join: %v", err)
	}
	s.advance(11 * time.Second) // never came back within the session timeout
	r.MemberID = res.MemberID
	if _, _, err := s.join(r); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("join with an expired pending member id: %v", err)
	}
	if !s.g.empty() {
		t.Fatal("group not empty")
	}
}

func TestInconsistentProtocol(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	s.stable(1)
	r := joinReq("", "", "cooperative-sticky")
	if _, _, err := s.join(r); !errors.Is(err, ErrInconsistentProtocol) {
		t.Fatalf("join with no common protocol: %v", err)
	}
	r = joinReq("", "", "range")
	r.ProtocolType = "connect"
	if _, _, err := s.join(r); !errors.Is(err, ErrInconsistentProtocol) {
		t.Fatalf("join with another protocol type: %v", err)
	}
}

func TestSyncTimeoutRemovesMembersThatNeverSync(t *testing.T) {
	s := newScenario(t, 100*time.Millisecond)
	o0, o1 := s.joinTwo("", "")
	follower := o1.res.MemberID
	if o1.res.LeaderID == follower {
		follower = o0.res.MemberID
	}
	step, err := s.g.sync(s.now, follower, "", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.advance(31 * time.Second) // the leader never syncs
	if o := recv(t, step.wait); !errors.Is(o.err, ErrRebalanceInProgress) {
		t.Fatalf("follower's sync: %+v", o)
	}
	if _, ok := s.g.members[o0.res.LeaderID]; ok {
		t.Fatal("the leader that never synced is still a member")
	}
}
