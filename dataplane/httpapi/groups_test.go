package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/httpapi"
)

type joinResp struct {
	MemberID   string `json:"member_id"`
	Generation int32  `json:"generation"`
	Leader     bool   `json:"leader"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
	} `json:"partitions"`
}

type fetchResp struct {
	Messages   []httpapi.Message `json:"messages"`
	Partitions []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Position      int64  `json:"position"`
		HighWatermark int64  `json:"high_watermark"`
	} `json:"partitions"`
}

func groupPath(group, rest string) string { return "/v1/groups/" + group + rest }

func (c *cell) join(tn *cptest.Tenant, b int, group string, body map[string]any) joinResp {
	c.t.Helper()
	var jr joinResp
	if s := c.as(tn, b, http.MethodPost, groupPath(group, "/members"), body, &jr); s != http.StatusOK {
		c.t.Fatalf("join %s on broker %d: %d", group, b, s)
	}
	return jr
}

// fetch is one group fetch; it returns the status and, for 200, the answer
// (else the error).
func (c *cell) fetch(tn *cptest.Tenant, b int, group string, jr joinResp, waitMs int) (int, fetchResp, apiError) {
	c.t.Helper()
	s, raw := c.call(b, http.MethodPost, groupPath(group, "/messages:fetch"), tn.KeyID, tn.Secret,
		map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "max_wait_ms": waitMs})
	var fr fetchResp
	var e apiError
	if s == http.StatusOK {
		if err := json.Unmarshal(raw, &fr); err != nil {
			c.t.Fatal(err)
		}
	} else {
		e = decodeError(c.t, raw)
	}
	return s, fr, e
}

func publishN(c *cell, tn *cptest.Tenant, topic string, from, n int) {
	c.t.Helper()
	var req publishReq
	for i := from; i < from+n; i++ {
		req.Messages = append(req.Messages, msg{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)), MessageID: fmt.Sprintf("id-%d", i)})
	}
	if s := c.as(tn, 0, http.MethodPost, publishPath(topic), req, nil); s != http.StatusOK {
		c.t.Fatalf("publish: %d", s)
	}
}

// TestGroupJoinFetchCommit: one member consumes everything; a second
// joins, the first is told to re-join, the partitions split between them,
// each resumes at the committed offsets, and a commit with the old
// generation is refused.
func TestGroupJoinFetchCommit(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "jobs", 4, nil)
	publishN(c, tn, "jobs", 0, 40)
	coordIdx := c.coordinator(tn, "workers")
	other := (coordIdx + 1) % 3 // requests here are forwarded to the coordinator

	a := c.join(tn, other, "workers", map[string]any{"topics": []string{"jobs"}})
	if len(a.Partitions) != 4 || !a.Leader || a.Generation < 1 {
		t.Fatalf("first member: %+v", a)
	}
	got := map[string]bool{}
	deadline := time.Now().Add(wait)
	for len(got) < 40 && time.Now().Before(deadline) {
		s, fr, e := c.fetch(tn, other, "workers", a, 1000)
		if s != http.StatusOK {
			t.Fatalf("fetch: %d %+v", s, e)
		}
		for _, m := range fr.Messages {
			if got[m.MessageID] {
				t.Fatalf("message %s delivered twice", m.MessageID)
			}
			if string(m.Value) != "v"+m.MessageID[3:] || m.Topic != "jobs" {
				t.Fatalf("message %+v", m)
			}
			got[m.MessageID] = true
		}
	}
	if len(got) != 40 {
		t.Fatalf("fetched %d of 40 messages", len(got))
	}
	// Commit everything (the next offset of each partition).
	var ends []map[string]any
	for p := range int32(4) {
		var rr readResp
		c.as(tn, 0, http.MethodGet, readPath("jobs", p, "offset=latest"), nil, &rr)
		ends = append(ends, map[string]any{"topic": "jobs", "partition": p, "offset": rr.HighWatermark})
	}
	if s := c.as(tn, coordIdx, http.MethodPost, groupPath("workers", "/offsets:commit"), map[string]any{"member_id": a.MemberID, "generation": a.Generation, "offsets": ends}, nil); s != http.StatusOK {
		t.Fatalf("commit: %d", s)
	}

	// A second member joins; its join completes once the first re-joins,
	// which it learns from a fetch (409 rebalance_in_progress).
	var b joinResp
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b = c.join(tn, (coordIdx+2)%3, "workers", map[string]any{"topics": []string{"jobs"}})
	}()
	var code string
	waitFor(t, "the first member told to re-join", func() bool {
		s, _, e := c.fetch(tn, other, "workers", a, 200)
		code = e.Code
		return s == http.StatusConflict
	})
	if code != "rebalance_in_progress" {
		t.Fatalf("fetch during rebalance: %s", code)
	}
	old := a
	a = c.join(tn, other, "workers", map[string]any{"topics": []string{"jobs"}, "member_id": a.MemberID})
	wg.Wait()
	if a.Generation != b.Generation || a.Generation <= old.Generation || len(a.Partitions)+len(b.Partitions) != 4 || len(a.Partitions) != 2 {
		t.Fatalf("after rebalance: a %+v, b %+v", a, b)
	}
	mine := map[int32]string{}
	for _, jr := range []joinResp{a, b} {
		for _, p := range jr.Partitions {
			if mine[p.Partition] != "" {
				t.Fatalf("partition %d assigned twice: %+v %+v", p.Partition, a, b)
			}
			mine[p.Partition] = jr.MemberID
		}
	}

	// A commit with the old generation is refused.
	s, raw := c.call(other, http.MethodPost, groupPath("workers", "/offsets:commit"), tn.KeyID, tn.Secret,
		map[string]any{"member_id": old.MemberID, "generation": old.Generation, "offsets": ends[:1]})
	if e := decodeError(t, raw); s != http.StatusConflict || e.Code != "illegal_generation" {
		t.Fatalf("stale commit: %d %+v", s, e)
	}

	// New messages go to the member owning their partition; nothing
	// committed is delivered again.
	publishN(c, tn, "jobs", 40, 20)
	seen := map[string]string{}
	deadline = time.Now().Add(wait)
	for len(seen) < 20 && time.Now().Before(deadline) {
		for i, jr := range []joinResp{a, b} {
			s, fr, e := c.fetch(tn, i, "workers", jr, 200)
			if s != http.StatusOK {
				t.Fatalf("fetch by %s: %d %+v", jr.MemberID, s, e)
			}
			for _, m := range fr.Messages {
				if got[m.MessageID] || seen[m.MessageID] != "" {
					t.Fatalf("message %s delivered again", m.MessageID)
				}
				if mine[m.Partition] != jr.MemberID {
					t.Fatalf("member %s got partition %d, assigned to %s", jr.MemberID, m.Partition, mine[m.Partition])
				}
				seen[m.MessageID] = jr.MemberID
			}
		}
	}
	if len(seen) != 20 {
		t.Fatalf("fetched %d of 20 new messages", len(seen))
	}

	// Leaving: the remaining member is told to re-join and then owns all.
	if s := c.as(tn, 2, http.MethodDelete, groupPath("workers", "/members/"+b.MemberID), nil, nil); s != http.StatusNoContent {
		t.Fatalf("leave: %d", s)
	}
	waitFor(t, "the remaining member told to re-join", func() bool {
		s, _, _ := c.fetch(tn, other, "workers", a, 200)
		return s == http.StatusConflict
	})
	a = c.join(tn, other, "workers", map[string]any{"topics": []string{"jobs"}, "member_id": a.MemberID})
	if len(a.Partitions) != 4 {
		t.Fatalf("after leave: %+v", a)
	}
}

// TestGroupNackDeadLetterRedrive: a nacked message comes back after a
// backoff with its attempt count, survives the coordinator forgetting its
// sessions, goes to the dead-letter topic after the last attempt with
// its origin in headers, the group moves past it, and redrive puts it
// back keeping its message id.
func TestGroupNackDeadLetterRedrive(t *testing.T) {
	c := startCell(t, cellOpts{retryAttempts: 3})
	tn := c.tenant("acme")
	c.topic(tn, "tasks", 1, nil)
	publishN(c, tn, "tasks", 0, 3)
	coordIdx := c.coordinator(tn, "crew")
	jr := c.join(tn, 1, "crew", map[string]any{"topics": []string{"tasks"}})

	var buf []struct {
		off     int64
		attempt int
		id      string
	}
	// next is the next message delivered to the member (from what the
	// last fetch returned, or a new fetch).
	next := func(want int64) (int, string) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for len(buf) == 0 && time.Now().Before(deadline) {
			s, fr, e := c.fetch(tn, 2, "crew", jr, 2000)
			if s != http.StatusOK {
				t.Fatalf("fetch: %d %+v", s, e)
			}
			for _, m := range fr.Messages {
				buf = append(buf, struct {
					off     int64
					attempt int
					id      string
				}{m.Offset, m.DeliveryAttempt, m.MessageID})
			}
		}
		if len(buf) == 0 {
			t.Fatalf("offset %d not delivered", want)
		}
		m := buf[0]
		buf = buf[1:]
		if m.off != want {
			t.Fatalf("delivered offset %d, want %d", m.off, want)
		}
		return m.attempt, m.id
	}
	nack := func(off int64) map[string]any {
		t.Helper()
		buf = nil // the partition rewinds
		var out map[string]any
		if s := c.as(tn, 0, http.MethodPost, groupPath("crew", "/messages:nack"),
			map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "topic": "tasks", "partition": 0, "offset": off, "error": "boom"}, &out); s != http.StatusOK {
			t.Fatalf("nack %d: %d", off, s)
		}
		return out
	}
	if at, id := next(0); at != 0 || id != "id-0" {
		t.Fatalf("first delivery: attempt %d id %s", at, id)
	}
	if out := nack(0); out["action"] != "retry" || out["attempts"] != 1.0 {
		t.Fatalf("first nack: %v", out)
	}
	if at, _ := next(0); at != 2 {
		t.Fatalf("second delivery: attempt %d", at)
	}
	if out := nack(0); out["action"] != "retry" || out["attempts"] != 2.0 {
		t.Fatalf("second nack: %v", out)
	}
	// The retry state is in the committed offset: a coordinator that
	// forgot its members' sessions delivers attempt 3.
	c.brokers[coordIdx].http.DropSessions()
	if at, _ := next(0); at != 3 {
		t.Fatalf("third delivery after the sessions were dropped: attempt %d", at)
	}
	out := nack(0)
	if out["action"] != "dead_letter" || out["attempts"] != 3.0 {
		t.Fatalf("last nack: %v", out)
	}
	dl := out["dead_letter"].(map[string]any)
	if dl["topic"] != "crew.dlq" {
		t.Fatalf("dead letter: %v", dl)
	}
	// The group moved past it.
	if at, id := next(1); at != 0 || id != "id-1" {
		t.Fatalf("after dead-lettering: attempt %d id %s", at, id)
	}
	// The dead letter keeps its key, value, headers and message id, and
	// says where it came from.
	// The coordinator created the dead-letter topic; broker 2 knows it
	// once its cell state has it (a 404 until then).
	var rr readResp
	var s int
	waitFor(t, "the dead-letter topic on broker 2", func() bool {
		rr = readResp{}
		s = c.as(tn, 2, http.MethodGet, readPath("crew.dlq", 0, "offset=0"), nil, &rr)
		return s != http.StatusNotFound
	})
	if s != http.StatusOK || len(rr.Messages) != 1 {
		t.Fatalf("read dead letters: %d %+v", s, rr)
	}
	m := rr.Messages[0]
	hs := map[string]string{}
	for _, h := range m.Headers {
		hs[h.Key] = string(h.Value)
	}
	if m.MessageID != "id-0" || string(m.Key) != "k0" || string(m.Value) != "v0" || hs["sluice-dlq-topic"] != "tasks" || hs["sluice-dlq-partition"] != "0" ||
		hs["sluice-dlq-offset"] != "0" || hs["sluice-dlq-attempts"] != "3" || hs["sluice-dlq-error"] != "boom" {
		t.Fatalf("dead letter %+v, headers %v", m, hs)
	}

	// Redrive moves it back to tasks with its message id, once.
	var red struct {
		Redriven  int   `json:"redriven"`
		Remaining int64 `json:"remaining"`
	}
	if s := c.as(tn, 1, http.MethodPost, groupPath("crew", "/dead-letters:redrive"), map[string]any{}, &red); s != http.StatusOK || red.Redriven != 1 || red.Remaining != 0 {
		t.Fatalf("redrive: %d %+v", s, red)
	}
	if s := c.as(tn, 0, http.MethodPost, groupPath("crew", "/dead-letters:redrive"), map[string]any{}, &red); s != http.StatusOK || red.Redriven != 0 {
		t.Fatalf("second redrive: %d %+v", s, red)
	}
	c.as(tn, 0, http.MethodGet, readPath("tasks", 0, "offset=3"), nil, &rr)
	if len(rr.Messages) != 1 || rr.Messages[0].MessageID != "id-0" || string(rr.Messages[0].Value) != "v0" || len(rr.Messages[0].Headers) != 0 {
		t.Fatalf("redriven message: %+v", rr.Messages)
	}
	// The member gets it again like any new message.
	next(2)
	if at, id := next(3); at != 0 || id != "id-0" {
		t.Fatalf("redriven delivery: attempt %d id %s", at, id)
	}
}

// TestGroupReset: offsets of a group without members move to earliest,
// latest, an offset or a time; with a member the reset is refused.
func TestGroupReset(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "log", 2, nil)
	publishN(c, tn, "log", 0, 10)
	mid := time.Now().UnixMilli()
	waitFor(t, "the clock to move past the first publish", func() bool { return time.Now().UnixMilli() > mid })
	mid = time.Now().UnixMilli()
	waitFor(t, "the clock to move", func() bool { return time.Now().UnixMilli() > mid })
	publishN(c, tn, "log", 10, 10)
	c.coordinator(tn, "readers")

	hws := map[int32]int64{}
	for p := range int32(2) {
		var rr readResp
		c.as(tn, 0, http.MethodGet, readPath("log", p, "offset=latest"), nil, &rr)
		hws[p] = rr.HighWatermark
	}
	offsets := func(body map[string]any) map[int32]int64 {
		t.Helper()
		var out struct {
			Offsets []struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			} `json:"offsets"`
		}
		if s := c.as(tn, 2, http.MethodPost, groupPath("readers", "/offsets:reset"), body, &out); s != http.StatusOK {
			t.Fatalf("reset %v: %d", body, s)
		}
		m := map[int32]int64{}
		for _, o := range out.Offsets {
			m[o.Partition] = o.Offset
		}
		return m
	}
	if got := offsets(map[string]any{"topic": "log", "to": "latest"}); got[0] != hws[0] || got[1] != hws[1] {
		t.Fatalf("latest: %v, want %v", got, hws)
	}
	if got := offsets(map[string]any{"topic": "log", "to": "offset", "offset": 1, "partitions": []int{1}}); len(got) != 1 || got[1] != 1 {
		t.Fatalf("offset 1: %v", got)
	}
	got := offsets(map[string]any{"topic": "log", "to": "timestamp", "timestamp_ms": mid})
	// Every record of the second publish is at or after mid, every one of
	// the first before it.
	var firstHalf int64
	for p := range int32(2) {
		var rr readResp
		c.as(tn, 0, http.MethodGet, readPath("log", p, "offset=0"), nil, &rr)
		for _, m := range rr.Messages {
			var i int
			fmt.Sscanf(m.MessageID, "id-%d", &i)
			if i < 10 && m.Offset >= got[p] {
				t.Errorf("partition %d: message %s at %d is at or after the reset point %d", p, m.MessageID, m.Offset, got[p])
			}
			if i >= 10 && m.Offset < got[p] {
				t.Errorf("partition %d: message %s at %d is before the reset point %d", p, m.MessageID, m.Offset, got[p])
			}
			if i < 10 {
				firstHalf++
			}
		}
	}
	if firstHalf != 10 {
		t.Fatalf("read %d messages of the first publish", firstHalf)
	}
	// A member starts at the reset offsets: exactly the second half.
	jr := c.join(tn, 0, "readers", map[string]any{"topics": []string{"log"}})
	var ids []string
	deadline := time.Now().Add(wait)
	for len(ids) < 10 && time.Now().Before(deadline) {
		_, fr, _ := c.fetch(tn, 1, "readers", jr, 500)
		for _, m := range fr.Messages {
			ids = append(ids, m.MessageID)
		}
	}
	sort.Strings(ids)
	if len(ids) != 10 || ids[0] != "id-10" || ids[9] != "id-19" {
		t.Fatalf("after a reset to the timestamp the member read %v", ids)
	}
	s, raw := c.call(1, http.MethodPost, groupPath("readers", "/offsets:reset"), tn.KeyID, tn.Secret, map[string]any{"topic": "log", "to": "earliest"})
	if e := decodeError(t, raw); s != http.StatusConflict || e.Code != "group_not_empty" {
		t.Fatalf("reset with a member: %d %+v", s, e)
	}
	// Once it leaves, earliest works.
	c.as(tn, 0, http.MethodDelete, groupPath("readers", "/members/"+jr.MemberID), nil, nil)
	if got := offsets(map[string]any{"topic": "log", "to": "earliest"}); got[0] != 0 || got[1] != 0 {
		t.Fatalf("earliest: %v", got)
	}
}
