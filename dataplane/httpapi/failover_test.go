package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/cptest"
)

// failoverWait bounds each wait for a Raft election or a coordinator
// load after a broker dies or comes back.
const failoverWait = 60 * time.Second

// publishTo publishes messages from..from+n-1 of partition p through
// broker b, retrying while the partition elects a leader; a retry after
// an unknown outcome may append twice, which the callers' offset checks
// tolerate (they follow offsets, not values).
func publishTo(c *cell, tn *cptest.Tenant, b int, topic string, p int32, from, n int) {
	c.t.Helper()
	var req publishReq
	for i := from; i < from+n; i++ {
		req.Messages = append(req.Messages, msg{Value: []byte(fmt.Sprintf("p%d-v%d", p, i)), Partition: ptr(p), MessageID: fmt.Sprintf("p%d-id-%d", p, i)})
	}
	deadline := time.Now().Add(failoverWait)
	for {
		s, raw := c.call(b, http.MethodPost, publishPath(topic), tn.KeyID, tn.Secret, req)
		if s == http.StatusOK {
			return
		}
		if e := decodeError(c.t, raw); !e.Retriable || time.Now().After(deadline) {
			c.t.Fatalf("publish to partition %d through broker %d: %d %s", p, b, s, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupConsumer drives one HTTP member through broker via, re-joining
// when the group answers that it rebalanced or lost the member, and
// riding out coordinator elections.
type groupConsumer struct {
	c     *cell
	tn    *cptest.Tenant
	via   int
	group string
	topic string
	jr    joinResp
}

func (g *groupConsumer) join() {
	g.c.t.Helper()
	body := map[string]any{"topics": []string{g.topic}}
	if g.jr.MemberID != "" {
		body["member_id"] = g.jr.MemberID
	}
	deadline := time.Now().Add(failoverWait)
	for {
		s, raw := g.c.call(g.via, http.MethodPost, groupPath(g.group, "/members"), g.tn.KeyID, g.tn.Secret, body)
		if s == http.StatusOK {
			var jr joinResp
			if err := json.Unmarshal(raw, &jr); err != nil {
				g.c.t.Fatal(err)
			}
			g.jr = jr
			return
		}
		e := decodeError(g.c.t, raw)
		switch {
		case e.Code == "unknown_member":
			delete(body, "member_id")
		case !e.Retriable && e.Code != "rebalance_in_progress":
			g.c.t.Fatalf("join through broker %d: %d %s", g.via, s, raw)
		}
		if time.Now().After(deadline) {
			g.c.t.Fatalf("join through broker %d: still %d %s", g.via, s, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fetch is one group fetch that re-joins on a rebalance, an unknown
// member or a stale generation, and retries retriable answers (a
// coordinator being elected or loading), within failoverWait.
func (g *groupConsumer) fetch(waitMs int) fetchResp {
	g.c.t.Helper()
	var fr fetchResp
	g.retry("fetch", func() (int, apiError, bool) {
		s, r, e := g.c.fetch(g.tn, g.via, g.group, g.jr, waitMs)
		fr = r
		return s, e, s == http.StatusOK
	})
	return fr
}

// commit commits offsets (partition → next offset), re-joining and
// retrying like fetch.
func (g *groupConsumer) commit(offsets map[int32]int64) {
	g.c.t.Helper()
	g.retry("commit", func() (int, apiError, bool) {
		var list []map[string]any
		for p, o := range offsets {
			list = append(list, map[string]any{"topic": g.topic, "partition": p, "offset": o})
		}
		s, raw := g.c.call(g.via, http.MethodPost, groupPath(g.group, "/offsets:commit"), g.tn.KeyID, g.tn.Secret,
			map[string]any{"member_id": g.jr.MemberID, "generation": g.jr.Generation, "offsets": list})
		if s == http.StatusOK || s == http.StatusNoContent {
			return s, apiError{}, true
		}
		return s, decodeError(g.c.t, raw), false
	})
}

// retry runs call (what the member does) until it succeeds, so that fetch
// and commit ride out a failover the same way: a member the coordinator
// no longer knows (or a stale generation) joins again, a retriable answer
// is tried again, anything else fails the test, as does no success
// within failoverWait.
func (g *groupConsumer) retry(what string, call func() (status int, e apiError, ok bool)) {
	g.c.t.Helper()
	deadline := time.Now().Add(failoverWait)
	for {
		s, e, ok := call()
		if ok {
			return
		}
		switch {
		case e.Code == "rebalance_in_progress" || e.Code == "unknown_member" || e.Code == "illegal_generation":
			g.c.t.Logf("%s through broker %d: %s; joining again", what, g.via, e.Code)
			g.join()
		case !e.Retriable:
			g.c.t.Fatalf("%s through broker %d: %d %+v", what, g.via, s, e)
		default:
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			g.c.t.Fatalf("%s through broker %d: still %d %+v", what, g.via, s, e)
		}
	}
}

// drain fetches until every partition in want was delivered up to (not
// including) its offset there, and checks that each partition's
// deliveries run exactly from from[p], without a gap, a repeat or a
// message from before it. Fetches that re-join start over from the
// committed offsets, which from must then be.
func (g *groupConsumer) drain(from, want map[int32]int64) {
	g.c.t.Helper()
	next := map[int32]int64{}
	for p, o := range from {
		next[p] = o
	}
	done := func() bool {
		for p, w := range want {
			if next[p] < w {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(failoverWait)
	for !done() {
		if time.Now().After(deadline) {
			g.c.t.Fatalf("delivered up to %v, want %v", next, want)
		}
		gen := g.jr.Generation
		fr := g.fetch(1000)
		if g.jr.Generation != gen {
			// A new generation starts again at the committed offsets.
			for p, o := range from {
				next[p] = o
			}
		}
		for _, m := range fr.Messages {
			if m.Topic != g.topic {
				g.c.t.Fatalf("message of topic %s", m.Topic)
			}
			if m.Offset != next[m.Partition] {
				g.c.t.Fatalf("partition %d: delivered offset %d, want %d (deliveries start at %v)", m.Partition, m.Offset, next[m.Partition], from)
			}
			next[m.Partition]++
		}
	}
}

// startFailoverGroup is where the coordinator failover tests start: a
// cell with acme's topic "orders" of parts partitions, ten messages in
// each, and a member of group "billing" joined through a broker that is
// not the group's coordinator (its requests are forwarded there), whose
// index it returns.
func startFailoverGroup(t *testing.T, parts int) (g *groupConsumer, coordIdx int) {
	t.Helper()
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "orders", parts, nil)
	coordIdx = c.coordinator(tn, "billing")
	via := (coordIdx + 1) % 3
	for p := range int32(parts) {
		publishTo(c, tn, via, "orders", p, 0, 10)
	}
	g = &groupConsumer{c: c, tn: tn, via: via, group: "billing", topic: "orders"}
	g.join()
	return g, coordIdx
}

// TestGroupCoordinatorFailover kills the broker coordinating an HTTP
// consumer group: the member carries on through another broker from its
// committed offsets, publishing carries on through the survivors, and
// when the killed broker comes back (and, as the preferred leader, takes
// the group back) nothing it knew before it died is used.
func TestGroupCoordinatorFailover(t *testing.T) {
	const parts = 3
	g, coordIdx := startFailoverGroup(t, parts)
	c, tn, via := g.c, g.tn, g.via
	if len(g.jr.Partitions) != parts {
		t.Fatalf("member: %+v", g.jr)
	}
	zero := map[int32]int64{0: 0, 1: 0, 2: 0}
	ten := map[int32]int64{0: 10, 1: 10, 2: 10}
	g.drain(zero, ten)
	// Every message was delivered; only some were processed.
	committed := map[int32]int64{0: 4, 1: 0, 2: 7}
	g.commit(committed)

	c.kill(coordIdx)
	// Publishing goes on through the survivors: partitions the killed
	// broker led elect another leader.
	for p := range int32(parts) {
		publishTo(c, tn, via, "orders", p, 10, 5)
	}
	fifteen := map[int32]int64{0: 15, 1: 15, 2: 15}
	// The member resumes exactly at its committed offsets: what was
	// delivered but not committed comes again, nothing is skipped.
	g.drain(committed, fifteen)
	t.Logf("after the kill: member %s generation %d", g.jr.MemberID, g.jr.Generation)
	g.commit(fifteen)

	c.restart(coordIdx)
	// The restarted broker is the group's preferred coordinator again.
	back := c.coordinator(tn, "billing")
	if back != coordIdx {
		t.Fatalf("coordinator after restart: broker %d, want %d", back, coordIdx)
	}
	for p := range int32(parts) {
		publishTo(c, tn, coordIdx, "orders", p, 15, 3)
	}
	eighteen := map[int32]int64{0: 18, 1: 18, 2: 18}
	// Through the restarted broker itself and through the others, the
	// group goes on from what was committed after the kill.
	g.via = coordIdx
	g.drain(fifteen, eighteen)
	g.commit(eighteen)
	for p := range int32(parts) {
		publishTo(c, tn, via, "orders", p, 18, 2)
	}
	g.via = (coordIdx + 2) % 3
	g.drain(eighteen, map[int32]int64{0: 20, 1: 20, 2: 20})
}

// TestGroupCoordinatorRegainedStartsFromCommitted cuts the broker
// coordinating an HTTP consumer group off its Raft peers while its HTTP
// API keeps running, lets the member go on through another coordinator,
// and reconnects it: when it coordinates the group again it must start
// from the offsets committed meanwhile, not from the positions it kept in
// memory from before.
func TestGroupCoordinatorRegainedStartsFromCommitted(t *testing.T) {
	const parts = 2
	g, coordIdx := startFailoverGroup(t, parts)
	c, tn, via := g.c, g.tn, g.via
	g.drain(map[int32]int64{0: 0, 1: 0}, map[int32]int64{0: 10, 1: 10})
	// The coordinator's positions are at 10; 4 and 6 are committed.
	g.commit(map[int32]int64{0: 4, 1: 6})

	c.isolate(coordIdx)
	waitFor(t, "another broker to coordinate the group", func() bool {
		for i, b := range c.brokers {
			if i == coordIdx {
				continue
			}
			if _, local, err := b.coord.Locate(tn.Tenant.ID, "billing"); err == nil && local {
				return true
			}
		}
		return false
	})
	// The member goes on at the new coordinator from its commits and
	// commits less than was delivered.
	g.drain(map[int32]int64{0: 4, 1: 6}, map[int32]int64{0: 10, 1: 10})
	committed := map[int32]int64{0: 8, 1: 7}
	g.commit(committed)

	c.reconnect(coordIdx)
	if back := c.coordinator(tn, "billing"); back != coordIdx {
		t.Fatalf("coordinator after reconnecting: broker %d, want %d", back, coordIdx)
	}
	for p := range int32(parts) {
		publishTo(c, tn, via, "orders", p, 10, 2)
	}
	// Through another broker, forwarded to the regained coordinator: the
	// member's positions are the offsets committed while it was away.
	g.drain(committed, map[int32]int64{0: 12, 1: 12})
}

// TestDeadLetterAcrossCoordinatorMove moves the group's coordinator
// away after a dead letter was published and before its offset was
// committed: the member gets the message again and nacks it again, and
// the dead-letter topic must still hold it once.
func TestDeadLetterAcrossCoordinatorMove(t *testing.T) {
	c := startCell(t, cellOpts{retryAttempts: 2})
	tn := c.tenant("acme")
	c.topic(tn, "orders", 1, nil)
	coordIdx := c.coordinator(tn, "billing")
	via := (coordIdx + 1) % 3
	publishTo(c, tn, via, "orders", 0, 0, 1)
	var once sync.Once
	c.brokers[coordIdx].http.AfterDeadLetter(func() { once.Do(func() { c.isolate(coordIdx) }) })
	g := &groupConsumer{c: c, tn: tn, via: via, group: "billing", topic: "orders"}
	g.join()
	nack := func() map[string]any {
		t.Helper()
		deadline := time.Now().Add(failoverWait)
		for {
			s, raw := c.call(via, http.MethodPost, groupPath("billing", "/messages:nack"), tn.KeyID, tn.Secret,
				map[string]any{"member_id": g.jr.MemberID, "generation": g.jr.Generation, "topic": "orders", "partition": 0, "offset": 0, "error": "boom"})
			if s == http.StatusOK {
				var out map[string]any
				if err := json.Unmarshal(raw, &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if e := decodeError(t, raw); !e.Retriable || time.Now().After(deadline) {
				t.Fatalf("nack: %d %s", s, raw)
			}
			t.Logf("nack: %d %s; again", s, raw)
			time.Sleep(100 * time.Millisecond)
		}
	}
	deliver := func() {
		t.Helper()
		deadline := time.Now().Add(failoverWait)
		for {
			fr := g.fetch(1000)
			if len(fr.Messages) > 0 {
				if m := fr.Messages[0]; m.Offset != 0 {
					t.Fatalf("delivered offset %d, want 0", m.Offset)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("offset 0 not delivered")
			}
		}
	}
	deadLettered := false
	for range 6 {
		deliver()
		out := nack()
		t.Logf("nack: %v", out)
		if out["action"] == "dead_letter" {
			deadLettered = true
			break
		}
	}
	if !deadLettered {
		t.Fatal("the message was never dead-lettered")
	}
	// The dead-letter topic holds the message once.
	var rr readResp
	deadline := time.Now().Add(failoverWait)
	for {
		if s := c.as(tn, via, http.MethodGet, readPath("billing.dlq", 0, "offset=earliest&max_wait_ms=0"), nil, &rr); s == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("read the dead-letter topic")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(rr.Messages) != 1 {
		t.Fatalf("the dead-letter topic holds %d messages, want 1: %+v", len(rr.Messages), rr.Messages)
	}
	c.reconnect(coordIdx)
}
