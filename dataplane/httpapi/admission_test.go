package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/groups"

	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/quotas"
)

// A tenant over its produce or fetch quota gets 429 with Retry-After and a
// specific code from the HTTP data API, before anything is written or
// read; another tenant is not affected.
func TestQuotaRefusalsOverHTTP(t *testing.T) {
	buckets, err := quotas.New(quotas.Config{})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admission.New(admission.Config{BrokerID: "cell-1-b1", Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	c := startCell(t, cellOpts{admission: adm})
	slow, other := c.tenant("slow"), c.tenant("other")
	c.topic(slow, "events", 1, nil)
	c.topic(other, "events", 1, nil)
	var l quotas.Limits
	l[quotas.ProduceBytes] = quotas.Limit{Rate: 1000, Burst: 1000}
	l[quotas.FetchBytes] = quotas.Limit{Rate: 1000, Burst: 1000}
	buckets.Set(slow.Tenant.ID, l, time.Now())

	do := func(id, secret, method, path string, body any) (int, http.Header, apiError) {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, "http://"+c.brokers[0].httpAddr+path, rd)
		req.SetBasicAuth(id, secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e apiError
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, resp.Header, e
	}
	big := publishReq{Messages: []msg{{Value: bytes.Repeat([]byte("x"), 20_000)}}}
	// The first publish is admitted (Kafka's order: record, then
	// throttle) and leaves the tenant 20 s in debt.
	if st, _, e := do(slow.KeyID, slow.Secret, "POST", publishPath("events"), big); st != 200 {
		t.Fatalf("first publish: %d %+v", st, e)
	}
	st, h, e := do(slow.KeyID, slow.Secret, "POST", publishPath("events"), big)
	if st != http.StatusTooManyRequests || e.Code != "throughput_quota_exceeded" || !e.Retriable {
		t.Fatalf("publish over quota: %d %+v", st, e)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	}
	// The refused publish wrote nothing: the partition holds one message.
	read := "/v1/topics/events/partitions/0/messages?offset=0&max_wait_ms=0"
	st, raw := c.call(0, "GET", read, slow.KeyID, slow.Secret, nil)
	var rr readResp
	if err := json.Unmarshal(raw, &rr); st != 200 || err != nil {
		t.Fatalf("first read: %d %s", st, raw)
	}
	if len(rr.Messages) != 1 || rr.HighWatermark != 1 {
		t.Fatalf("after one admitted and one refused publish: %d messages, high watermark %d", len(rr.Messages), rr.HighWatermark)
	}
	st, h, e = do(slow.KeyID, slow.Secret, "GET", read, nil)
	if st != http.StatusTooManyRequests || e.Code != "throughput_quota_exceeded" || h.Get("Retry-After") == "" {
		t.Fatalf("read over fetch quota: %d %+v (Retry-After %q)", st, e, h.Get("Retry-After"))
	}
	// Another tenant on the same broker is unaffected.
	for i := 0; i < 3; i++ {
		if st, _, e := do(other.KeyID, other.Secret, "POST", publishPath("events"), big); st != 200 {
			t.Fatalf("other tenant's publish %d: %d %+v", i, st, e)
		}
	}
}

// TestNackFetchLoopWithinRequestRate runs an ordinary HTTP consumer loop
// for a minute: fetch (long-polling 5 s), nack a message it gets, fetch
// until the nacked message comes back, again and again, entering
// the cell through every broker in turn, so that most requests are
// forwarded to the group's coordinator and the coordinator reads the
// partitions other brokers lead; another client of the tenant reads a
// partition by offset each round. The tenant has the free plan's quotas
// (200 requests/s for the cell, an even 66.7/s share per broker), which
// such a loop is far below: no request of it may be refused, on any
// broker, internal partition reads included, and every nacked message
// must come back.
func TestNackFetchLoopWithinRequestRate(t *testing.T) {
	// The first retry after 1 s (the default), then 2 s, then every 4 s.
	c := startCell(t, cellOpts{isolation: true, retryAttempts: 1 << 30, retryBackoff: time.Second, retryMaxBackoff: 4 * time.Second})
	tn := c.tenant("looper")
	jobs := c.topic(tn, "jobs", 3, nil)
	var req publishReq
	for p := range int32(3) {
		req.Messages = append(req.Messages, msg{Value: []byte(fmt.Sprintf("job-%d", p)), Partition: &p})
	}
	if s := c.as(tn, 0, http.MethodPost, publishPath("jobs"), req, nil); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	coord := c.coordinator(tn, "loop")
	// The member nacks the messages of the partition its coordinator
	// leads, again and again, and processes the others' (they are empty
	// afterwards): while a nacked message waits out its backoff, the
	// coordinator's long poll reads the other two partitions on their
	// leaders.
	var failing int32 = -1
	for p := range int32(3) {
		if l, _ := c.leader(jobs.ID, p); l == coord {
			failing = p
		}
	}
	if failing < 0 {
		t.Fatalf("the coordinator, broker %d, leads no partition of jobs", coord+1)
	}
	jr := c.join(tn, (coord+1)%3, "loop", map[string]any{"topics": []string{"jobs"}})
	if len(jr.Partitions) != 3 {
		t.Fatalf("one member got partitions %+v, want all three", jr.Partitions)
	}
	type key struct {
		p   int32
		off int64
	}
	// call is one request of the loop through broker b. A refusal (429)
	// fails the test; other retriable errors (a leader or coordinator
	// moving on a busy machine) are retried as a client would.
	retried := 0
	call := func(b int, rest string, body any) []byte {
		t.Helper()
		for {
			s, raw := c.call(b, http.MethodPost, groupPath("loop", rest), tn.KeyID, tn.Secret, body)
			if s == http.StatusOK {
				return raw
			}
			if e := decodeError(t, raw); s == http.StatusTooManyRequests || !e.Retriable {
				t.Fatalf("%s through broker %d (coordinator %d): %d %s", rest, b, coord, s, raw)
			}
			if retried++; retried > 100 {
				t.Fatalf("%s through broker %d: %d %s, after %d retried errors", rest, b, s, raw, retried)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	nacked := map[key]time.Time{} // nacked, not back yet: since when
	back := 0
	run := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(run); i++ {
		b := i % 3
		// Another client of the tenant reads a partition by offset.
		read := fmt.Sprintf("/v1/topics/jobs/partitions/%d/messages?offset=0&max_wait_ms=0", i%3)
		if s, raw := c.call(b, http.MethodGet, read, tn.KeyID, tn.Secret, nil); s == http.StatusTooManyRequests {
			t.Fatalf("read through broker %d: %d %s", b, s, raw)
		}
		raw := call(b, "/messages:fetch", map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "max_wait_ms": 5000})
		var fr fetchResp
		if err := json.Unmarshal(raw, &fr); err != nil {
			t.Fatal(err)
		}
		for _, m := range fr.Messages {
			if m.Partition != failing {
				continue
			}
			k := key{m.Partition, m.Offset}
			if _, ok := nacked[k]; ok {
				back++
				delete(nacked, k)
			}
			nb := (i + 1) % 3
			call(nb, "/messages:nack", map[string]any{"member_id": jr.MemberID, "generation": jr.Generation,
				"topic": "jobs", "partition": m.Partition, "offset": m.Offset, "error": "not yet"})
			nacked[k] = time.Now()
		}
		for k, since := range nacked {
			if time.Since(since) > wait {
				t.Fatalf("message %d/%d nacked %v ago has not come back (%d came back before)", k.p, k.off, time.Since(since).Round(time.Second), back)
			}
		}
	}
	if back < 3 {
		t.Fatalf("only %d nacked messages came back in a minute", back)
	}
	for i, b := range c.brokers {
		for _, cause := range []admission.Cause{admission.CauseRequestRate, admission.CauseFetchRate} {
			if n := b.adm.Rejections(tn.Tenant.ID, cause); n != 0 {
				t.Errorf("broker %d refused %v of the tenant's requests (%s)", i+1, n, cause)
			}
		}
	}
	t.Logf("%d nacked messages came back; %d retriable errors retried", back, retried)
}

// refused is one 429 answer: its code, Retry-After and the wait its
// message names.
type refused struct {
	code       string
	retryAfter time.Duration // the header, whole seconds
	says       time.Duration // "retry in …" in the message
}

var retryIn = regexp.MustCompile(`retry in ([0-9.]+[a-zµ]+)`)

func refusedOf(t *testing.T, status int, h http.Header, raw []byte) refused {
	t.Helper()
	if status != http.StatusTooManyRequests {
		t.Fatalf("got %d %s, want 429", status, raw)
	}
	e := decodeError(t, raw)
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Fatalf("429 %s with Retry-After %q", raw, h.Get("Retry-After"))
	}
	m := retryIn.FindStringSubmatch(e.Message)
	if m == nil {
		t.Fatalf("429 message %q names no wait", e.Message)
	}
	says, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if !e.Retriable {
		t.Fatalf("429 %s is not retriable", raw)
	}
	r := refused{code: e.Code, retryAfter: time.Duration(secs) * time.Second, says: says}
	// The header is the message's wait rounded up to whole seconds.
	if want := max((says + time.Second - 1).Truncate(time.Second), time.Second); r.retryAfter != want {
		t.Fatalf("Retry-After %v for a message saying %v (want %v)", r.retryAfter, says, want)
	}
	return r
}

// callH is c.call as the tenant's key that also returns the answer's headers.
func (c *cell) callH(b int, method, path string, tn *cptest.Tenant, body any, hdr ...string) (int, http.Header, []byte) {
	c.t.Helper()
	return c.callWithHeaders(b, method, path, tn.KeyID, tn.Secret, body, hdr...)
}

// TestRefusalNamesTheTrueWait: a tenant over its request rate or its
// produce throughput is told the limiter's true wait (Retry-After and
// message), also when another broker refused a forwarded request, and
// its next request after waiting that long is admitted. A tenant cannot
// escape its request rate by sending the forwarding headers itself.
func TestRefusalNamesTheTrueWait(t *testing.T) {
	c := startCell(t, cellOpts{isolation: true})
	ctx := context.Background()

	t.Run("request rate", func(t *testing.T) {
		tn := c.tenant("eager")
		c.topic(tn, "events", 1, nil)
		// 1 request/s for the cell: a third of one per broker, burst 1.
		q, err := c.cp.Operator.AdminQuotas(ctx, tn.Tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		q.MaxRequestsPerSec = 1
		if _, err := c.cp.Operator.AdminSetQuotas(ctx, tn.Tenant.ID, q); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every broker's new request rate", func() bool {
			for _, b := range c.brokers {
				if r, ok := b.adm.RequestRate(tn.Tenant.ID); !ok || math.Abs(r-1.0/3) > 1e-9 {
					return false
				}
			}
			return true
		})
		read := "/v1/topics/events/partitions/0/messages?offset=0&max_wait_ms=0"
		var r refused
		for i := 0; ; i++ {
			s, h, raw := c.callH(0, http.MethodGet, read, tn, nil)
			if s == http.StatusOK && i < 5 {
				continue
			}
			r = refusedOf(t, s, h, raw)
			break
		}
		if r.code != "request_rate_exceeded" || r.says <= 0 || r.says > 3*time.Second {
			t.Fatalf("refusal %+v: want request_rate_exceeded within the 3 s a request takes to come back", r)
		}
		time.Sleep(r.retryAfter)
		if s, raw := c.call(0, http.MethodGet, read, tn.KeyID, tn.Secret, nil); s != http.StatusOK {
			t.Fatalf("after waiting the Retry-After of %v: %d %s", r.retryAfter, s, raw)
		}
		// The request rate is spent again: requests claiming to be
		// forwards are counted like any other.
		before := c.brokers[0].adm.Rejections(tn.Tenant.ID, admission.CauseRequestRate)
		forged := []string{"Sluice-Forwarded-Hops", "1", "Sluice-Forwarded-By", fmt.Sprintf("2.%d.%s", time.Now().UnixMilli(), strings.Repeat("A", 43))}
		for range 3 {
			c.callH(0, http.MethodGet, read, tn, nil, forged...)
		}
		if after := c.brokers[0].adm.Rejections(tn.Tenant.ID, admission.CauseRequestRate); after == before {
			t.Fatal("three requests with made-up forwarding headers were all admitted at a third of a request per second")
		}
	})

	t.Run("produce throughput", func(t *testing.T) {
		tn := c.tenant("bulky")
		wt := c.topic(tn, "events", 1, nil)
		leader, follower := c.leader(wt.ID, 0)
		buckets := c.brokers[leader].buckets
		var l quotas.Limits
		l[quotas.ProduceBytes] = quotas.Limit{Rate: 10_000, Burst: 10_000}
		buckets.Set(tn.Tenant.ID, l, time.Now())
		big := publishReq{Messages: []msg{{Value: bytes.Repeat([]byte("x"), 40_000)}}}
		if s, raw := c.call(leader, http.MethodPost, publishPath("events"), tn.KeyID, tn.Secret, big); s != http.StatusOK {
			t.Fatalf("first publish: %d %s", s, raw)
		}
		small := publishReq{Messages: []msg{{Value: []byte("x")}}}
		var last time.Time
		for _, entry := range []int{leader, follower} {
			before := buckets.Throttle(tn.Tenant.ID, quotas.ProduceBytes, time.Now())
			s, h, raw := c.callH(entry, http.MethodPost, publishPath("events"), tn, small)
			last = time.Now()
			after := buckets.Throttle(tn.Tenant.ID, quotas.ProduceBytes, last)
			r := refusedOf(t, s, h, raw)
			// The wait named lies between the debt read just before and
			// just after the refusal.
			if r.code != "throughput_quota_exceeded" || r.says < after.Truncate(time.Millisecond) || r.says > before+time.Millisecond {
				t.Fatalf("through broker %d (leader %d): refusal %+v, the limiter's wait went from %v to %v", entry, leader, r, before, after)
			}
			if entry == follower {
				time.Sleep(r.retryAfter - time.Since(last))
			}
		}
		if s, raw := c.call(follower, http.MethodPost, publishPath("events"), tn.KeyID, tn.Secret, small); s != http.StatusOK {
			t.Fatalf("after waiting the Retry-After: %d %s", s, raw)
		}
	})
}

// TestGroupFetchSaysItCannotRead: when the leader of a member's partition
// refuses the coordinator's read (the tenant owes fetch bytes there), the
// group fetch answers that refusal, 429 with Retry-After, through the
// coordinator and through another broker, instead of an empty 200 that
// looks like "nothing yet"; so does a nack whose dead-lettering must
// read the message there.
func TestGroupFetchSaysItCannotRead(t *testing.T) {
	c := startCell(t, cellOpts{isolation: true, retryAttempts: 1})
	tn := c.tenant("thirsty")
	wt := c.topic(tn, "events", 1, nil)
	publishN(c, tn, "events", 0, 3)
	leader, _ := c.leader(wt.ID, 0)
	// A group whose coordinator is not the partition's leader.
	group := ""
	for i := 0; group == ""; i++ {
		g := fmt.Sprintf("readers-%d", i)
		if int(groups.Partition(tn.Tenant.ID, g, groups.DefaultPartitions))%3 != leader {
			group = g
		}
	}
	coord := c.coordinator(tn, group)
	other := 3 - coord - leader // neither
	jr := c.join(tn, coord, group, map[string]any{"topics": []string{"events"}})
	if s, fr, e := c.fetch(tn, other, group, jr, 0); s != http.StatusOK || len(fr.Messages) != 3 {
		t.Fatalf("first fetch: %d %+v %+v", s, fr, e)
	}
	// The tenant owes the leader 9 s of fetch bytes.
	var l quotas.Limits
	l[quotas.FetchBytes] = quotas.Limit{Rate: 1000, Burst: 1000}
	buckets := c.brokers[leader].buckets
	buckets.Set(tn.Tenant.ID, l, time.Now())
	buckets.Record(tn.Tenant.ID, quotas.FetchBytes, 10_000, time.Now())
	check := func(what string, r refused) {
		t.Helper()
		if r.code != "throughput_quota_exceeded" || r.retryAfter > 10*time.Second {
			t.Fatalf("%s (coordinator %d, leader %d): %+v", what, coord, leader, r)
		}
	}
	for _, entry := range []int{coord, other} {
		for _, waitMs := range []int{0, 2000} {
			s, h, raw := c.callH(entry, http.MethodPost, groupPath(group, "/messages:fetch"), tn,
				map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "max_wait_ms": waitMs})
			check(fmt.Sprintf("fetch through broker %d, max_wait_ms %d", entry, waitMs), refusedOf(t, s, h, raw))
		}
	}
	nack := map[string]any{"member_id": jr.MemberID, "generation": jr.Generation, "topic": "events", "partition": 0, "offset": 0, "error": "bad"}
	s, h, raw := c.callH(other, http.MethodPost, groupPath(group, "/messages:nack"), tn, nack)
	check("nack through another broker", refusedOf(t, s, h, raw))
	// Once the debt is repaid the message comes again (the refused nack
	// had rewound the partition to it) and its nack dead-letters it.
	buckets.Set(tn.Tenant.ID, quotas.Limits{}, time.Now())
	waitFor(t, "offset 0 delivered again", func() bool {
		s, fr, _ := c.fetch(tn, other, group, jr, 1000)
		return s == http.StatusOK && len(fr.Messages) > 0 && fr.Messages[0].Offset == 0
	})
	var out map[string]any
	if s := c.as(tn, other, http.MethodPost, groupPath(group, "/messages:nack"), nack, &out); s != http.StatusOK || out["action"] != "dead_letter" {
		t.Fatalf("nack after the debt is gone: %d %v", s, out)
	}
}
