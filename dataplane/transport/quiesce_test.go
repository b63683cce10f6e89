package transport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// fastRaft shortens a group's Raft timeouts so that a test sees many
// heartbeat intervals: heartbeats every 100–200 ms, quiesced for 400 ms
// after each real answer.
func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout = time.Second, time.Second
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 50 * time.Millisecond
}

// idleRaft is fastRaft with a 3 s heartbeat timeout, for the test that
// idles: quiescing lets a follower go 3/5 of it without a real contact,
// and the 2/5 left (1.2 s) must cover a scheduler stall of the busy CI
// machine, which 400 ms of a 1 s timeout did not (a follower timed its
// leader out there, quiescing or not being beside the point).
func idleRaft(c *raft.Config) {
	fastRaft(c)
	c.HeartbeatTimeout, c.ElectionTimeout = 3*time.Second, 3*time.Second
	c.LeaderLeaseTimeout = 1500 * time.Millisecond
}

func fastProbes(c *Config) { c.ProbeInterval, c.DownAfter = 20*time.Millisecond, 200*time.Millisecond }

// TestQuiescedGroupsKeepLeaders: with heartbeats quiesced, idle groups
// keep their leaders and terms (every follower still hears from its
// leader often enough), most heartbeats and repeated empty appends are
// answered without a frame, and a write still reaches every replica.
func TestQuiescedGroupsKeepLeaders(t *testing.T) {
	c := newCell(t, 3, 4, 0, fastProbes, idleRaft)
	c.waitLeaders(time.Minute)
	terms := map[string]uint64{}
	for _, g := range c.groups {
		terms[g] = c.rafts[g][c.leader(g)].CurrentTerm()
	}
	quiesced := func() (q, sent uint64) {
		for _, n := range c.nodes {
			st := n.Stats()
			q += st.Quiesced
			sent += st.Sent["heartbeat"]
		}
		return q, sent
	}
	q0, sent0 := quiesced()
	// About five heartbeat timeouts' worth of heartbeats (7 to 10 per
	// follower per timeout, 8 followers).
	testkit.WaitFor(t, 2*time.Minute, "heartbeats quiesced", func() bool { q, _ := quiesced(); return q-q0 >= 300 })
	q, sent := quiesced()
	t.Logf("quiesced %d, heartbeats sent %d", q-q0, sent-sent0)
	if q-q0 <= sent-sent0 {
		t.Errorf("quiesced %d heartbeats and appends, sent %d heartbeats: most should be quiesced", q-q0, sent-sent0)
	}
	for _, g := range c.groups {
		l := c.leader(g)
		if l < 0 {
			t.Fatalf("group %s lost its leader while idle", g)
		}
		if got := c.rafts[g][l].CurrentTerm(); got != terms[g] {
			t.Errorf("group %s: term %d after idling, was %d: a follower timed out its leader", g, got, terms[g])
		}
	}
	c.applyAll(t, c.groups, "after-idle-", time.Minute)
}

// TestQuiescedLeaderCutOffStepsDown: a leader cut off from its followers
// stops being answered for (its peers are found down within DownAfter), so
// its lease expires and it steps down, while the followers elect another.
func TestQuiescedLeaderCutOffStepsDown(t *testing.T) {
	c := newCell(t, 3, 1, 0, fastProbes, fastRaft)
	c.waitLeaders(time.Minute)
	g := c.groups[0]
	// Let quiescing start.
	testkit.WaitFor(t, time.Minute, "heartbeats quiesced", func() bool { return c.nodes[c.leader(g)].Stats().Quiesced > 10 })
	old := c.leader(g)
	term := c.rafts[g][old].CurrentTerm()
	c.faults.Isolate(string(c.nodes[old].ID()))
	testkit.WaitFor(t, time.Minute, "the cut-off leader to step down", func() bool { return c.rafts[g][old].State() != raft.Leader })
	testkit.WaitFor(t, time.Minute, "a new leader among the others", func() bool {
		l := c.leader(g, old)
		return l >= 0 && c.rafts[g][l].CurrentTerm() > term
	})
	c.faults.Heal()
	c.waitLeaders(time.Minute)
	if err := c.apply(g, "after-heal", time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestQuiesceOff: without QuiesceHeartbeats every heartbeat is sent.
func TestQuiesceOff(t *testing.T) {
	c := newCell(t, 3, 2, 0, fastProbes, fastRaft)
	for _, g := range c.groups {
		for _, tr := range c.trans[g] {
			tr.QuiesceHeartbeats(0)
		}
	}
	c.waitLeaders(time.Minute)
	count := func() (sent, quiesced uint64) {
		for _, n := range c.nodes {
			st := n.Stats()
			sent += st.Sent["heartbeat"]
			quiesced += st.Quiesced
		}
		return sent, quiesced
	}
	s0, q0 := count()
	testkit.WaitFor(t, time.Minute, "heartbeats sent", func() bool { s, _ := count(); return s-s0 >= 50 })
	if _, q := count(); q != q0 {
		t.Fatalf("quiesced %d with quiescing off", q-q0)
	}
}
