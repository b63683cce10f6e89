package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/httpapi"
	"github.com/sluicehq/sluice/dataplane/records"
)

type (
	msg        = httpapi.PublishMessage
	hdr        = httpapi.JSONHeader
	publishReq = httpapi.PublishRequest
)

type publishResp struct {
	Messages []struct {
		Partition int32     `json:"partition"`
		Offset    int64     `json:"offset"`
		MessageID string    `json:"message_id"`
		Error     *apiError `json:"error"`
	} `json:"messages"`
}

type readResp struct {
	Messages       []httpapi.Message `json:"messages"`
	NextOffset     int64             `json:"next_offset"`
	HighWatermark  int64             `json:"high_watermark"`
	LogStartOffset int64             `json:"log_start_offset"`
}

func ptr[T any](v T) *T { return &v }

func publishPath(topic string) string { return "/v1/topics/" + topic + "/messages:publish" }

func readPath(topic string, p int32, q string) string {
	return fmt.Sprintf("/v1/topics/%s/partitions/%d/messages?%s", topic, p, q)
}

// TestPublishAndRead publishes keyed, null-key and explicitly placed
// messages to every broker and reads them back by partition and offset.
func TestPublishAndRead(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	wt := c.topic(tn, "orders", 3, nil)

	req := publishReq{Messages: []msg{
		{Key: []byte("user-1"), Value: []byte("signed up"), Headers: []hdr{{Key: "source", Value: []byte("web")}, {Key: "null", Value: nil}}},
		{Key: []byte("user-2"), Value: []byte("paid"), MessageID: "order-42"},
		{Key: []byte("user-1"), Value: []byte("logged in")},
		{Value: []byte("no key a")},
		{Value: []byte("no key b")},
		{Key: []byte("k"), Value: []byte{0, 1, 2, 255}, Partition: ptr[int32](2)},
		{Key: []byte{}, Value: nil},
	}}
	var res publishResp
	if s := c.as(tn, 0, http.MethodPost, publishPath("orders"), req, &res); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	if len(res.Messages) != len(req.Messages) {
		t.Fatalf("%d results for %d messages", len(res.Messages), len(req.Messages))
	}
	seen := map[string]bool{}
	for i, r := range res.Messages {
		m := req.Messages[i]
		switch {
		case r.Error != nil || r.Offset < 0:
			t.Fatalf("message %d: %+v", i, r)
		case m.Partition != nil && r.Partition != *m.Partition:
			t.Errorf("message %d went to %d, asked for %d", i, r.Partition, *m.Partition)
		case m.Partition == nil && m.Key != nil && r.Partition != records.KeyPartition(m.Key, 3):
			t.Errorf("message %d with key %q went to %d, Kafka's partitioner says %d", i, m.Key, r.Partition, records.KeyPartition(m.Key, 3))
		case m.MessageID != "" && r.MessageID != m.MessageID:
			t.Errorf("message %d: id %q, gave %q", i, r.MessageID, m.MessageID)
		case r.MessageID == "" || seen[r.MessageID]:
			t.Errorf("message %d: id %q missing or repeated", i, r.MessageID)
		}
		seen[r.MessageID] = true
	}
	if res.Messages[3].Partition != res.Messages[4].Partition {
		t.Errorf("null-key messages of one publish went to partitions %d and %d; they stick to one", res.Messages[3].Partition, res.Messages[4].Partition)
	}
	// Offsets are dense per partition, in request order.
	next := map[int32]int64{}
	for i, r := range res.Messages {
		if want, ok := next[r.Partition]; ok && r.Offset != want {
			t.Errorf("message %d at offset %d of partition %d, want %d", i, r.Offset, r.Partition, want)
		}
		next[r.Partition] = r.Offset + 1
	}

	// Read every partition back from every broker (two of three forward).
	for b := range c.brokers {
		got := map[string]int{}
		for p := range int32(3) {
			var rr readResp
			if s := c.as(tn, b, http.MethodGet, readPath("orders", p, "offset=0"), nil, &rr); s != http.StatusOK {
				t.Fatalf("read partition %d on broker %d: %d", p, b, s)
			}
			if rr.HighWatermark != next[p] || rr.NextOffset != next[p] {
				t.Errorf("partition %d: high watermark %d, next %d, want %d", p, rr.HighWatermark, rr.NextOffset, next[p])
			}
			for _, m := range rr.Messages {
				for i, r := range res.Messages {
					if r.MessageID != m.MessageID {
						continue
					}
					got[m.MessageID]++
					w := req.Messages[i]
					if r.Partition != p || r.Offset != m.Offset || !bytes.Equal(m.Key, w.Key) || (m.Key == nil) != (w.Key == nil) ||
						!bytes.Equal(m.Value, w.Value) || (m.Value == nil) != (w.Value == nil) || fmt.Sprint(m.Headers) != fmt.Sprint(nonNil(w.Headers)) {
						t.Errorf("broker %d read %+v for published %+v at %d/%d", b, m, w, r.Partition, r.Offset)
					}
					if m.TimestampMs <= 0 {
						t.Errorf("message %s has timestamp %d", m.MessageID, m.TimestampMs)
					}
				}
			}
		}
		if len(got) != len(req.Messages) {
			t.Errorf("broker %d read %d of %d messages: %v", b, len(got), len(req.Messages), got)
		}
	}
	_ = wt

	// From an offset inside the log, and with a tiny max_bytes (at least
	// one batch still comes back).
	p := res.Messages[0].Partition
	var rr readResp
	c.as(tn, 1, http.MethodGet, readPath("orders", p, fmt.Sprintf("offset=%d&max_bytes=1", res.Messages[2].Offset)), nil, &rr)
	if len(rr.Messages) == 0 || rr.Messages[0].Offset != res.Messages[2].Offset {
		t.Errorf("read from offset %d: %+v", res.Messages[2].Offset, rr)
	}
	// "latest" and "earliest".
	c.as(tn, 2, http.MethodGet, readPath("orders", p, "offset=latest"), nil, &rr)
	if len(rr.Messages) != 0 || rr.NextOffset != next[p] {
		t.Errorf("read at latest: %+v", rr)
	}
	c.as(tn, 2, http.MethodGet, readPath("orders", p, "offset=earliest"), nil, &rr)
	if len(rr.Messages) == 0 || rr.Messages[0].Offset != 0 {
		t.Errorf("read at earliest: %+v", rr)
	}
}

func nonNil(h []hdr) []hdr {
	if h == nil {
		return []hdr{}
	}
	return h
}

// TestReadLongPoll: a read at the high watermark waits for the next
// publish and returns it.
func TestReadLongPoll(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	wt := c.topic(tn, "events", 1, nil)
	_, follower := c.leader(wt.ID, 0)

	var wg sync.WaitGroup
	var rr readResp
	var status int
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Through a follower, so the long poll is forwarded too.
		status = c.as(tn, follower, http.MethodGet, readPath("events", 0, "offset=0&max_wait_ms=10000"), nil, &rr)
	}()
	var res publishResp
	if s := c.as(tn, 0, http.MethodPost, publishPath("events"), publishReq{Messages: []msg{{Value: []byte("late")}}}, &res); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	wg.Wait()
	if status != http.StatusOK {
		t.Fatalf("long poll: %d", status)
	}
	// The poll either saw the message or timed out empty first; it must
	// not return anything else.
	if len(rr.Messages) > 0 && (string(rr.Messages[0].Value) != "late" || rr.Messages[0].MessageID != res.Messages[0].MessageID) {
		t.Fatalf("long poll returned %+v", rr.Messages)
	}
	if len(rr.Messages) == 0 && rr.NextOffset != 0 {
		t.Fatalf("empty long poll answered next offset %d", rr.NextOffset)
	}
}

// publishReadVia publishes value to partition 0 of an empty topic through
// broker via and reads it back there: the round trip the forwarding tests
// send through a broker that does not lead the partition. The read must
// return just that message, with the id the publish answered.
func publishReadVia(c *cell, tn *cptest.Tenant, via int, topic, value string) {
	c.t.Helper()
	var res publishResp
	if s := c.as(tn, via, http.MethodPost, publishPath(topic), publishReq{Messages: []msg{{Value: []byte(value)}}}, &res); s != http.StatusOK {
		c.t.Fatalf("publish %q through broker %d: %d", value, via, s)
	}
	var rr readResp
	if s := c.as(tn, via, http.MethodGet, readPath(topic, 0, "offset=0"), nil, &rr); s != http.StatusOK || len(rr.Messages) != 1 ||
		string(rr.Messages[0].Value) != value || rr.Messages[0].MessageID != res.Messages[0].MessageID {
		c.t.Fatalf("read %q through broker %d: %d %+v", value, via, s, rr)
	}
}

// TestForwardingToLeader publishes to and reads from a broker that does
// not lead the partition, and checks the hop limit.
func TestForwardingToLeader(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	wt := c.topic(tn, "orders", 1, nil)
	leader, follower := c.leader(wt.ID, 0)

	publishReadVia(c, tn, follower, "orders", "via follower")
	// The follower counted the forwards in its metrics; the leader none.
	if s, body := c.call(follower, http.MethodGet, "/metrics", "", "", nil); s != http.StatusNotFound || strings.Contains(string(body), "sluice_") {
		t.Errorf("the tenants' data port serves metrics: %d %.200s", s, body)
	}
	metrics := c.metrics(follower)
	for _, want := range []string{
		`sluice_http_forwards_total{outcome="answered",route="/v1/topics/:topic/messages:publish"} 1`,
		`sluice_http_forwards_total{outcome="answered",route="/v1/topics/:topic/partitions/:partition/messages"} 1`,
		`sluice_http_requests_total{method="POST",route="/v1/topics/:topic/messages:publish",status="200"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("follower metrics lack %s:\n%s", want, metrics)
		}
	}
	metrics = c.metrics(leader)
	if !strings.Contains(string(metrics), `sluice_http_published_total{unit="messages"} 1`) {
		t.Errorf("leader metrics lack the published message:\n%s", metrics)
	}

	// A request that was forwarded too often already is not forwarded
	// again: a retriable not_leader.
	for _, path := range []string{readPath("orders", 0, "offset=0")} {
		s, raw := c.call(follower, http.MethodGet, path, tn.KeyID, tn.Secret, nil, "Sluice-Forwarded-Hops", "2")
		if e := decodeError(t, raw); s != http.StatusServiceUnavailable || e.Code != "not_leader" || !e.Retriable {
			t.Errorf("GET %s with 2 hops on a follower: %d %+v", path, s, e)
		}
	}
	s, raw := c.call(follower, http.MethodPost, publishPath("orders"), tn.KeyID, tn.Secret, publishReq{Messages: []msg{{Value: []byte("x")}}}, "Sluice-Forwarded-Hops", "2")
	if e := decodeError(t, raw); s != http.StatusServiceUnavailable || e.Code != "not_leader" || !e.Retriable {
		t.Errorf("publish with 2 hops on a follower: %d %+v", s, e)
	}
	// The leader itself serves such a request.
	if s, _ := c.call(leader, http.MethodGet, readPath("orders", 0, "offset=0"), tn.KeyID, tn.Secret, nil, "Sluice-Forwarded-Hops", "2"); s != http.StatusOK {
		t.Errorf("read with 2 hops on the leader: %d", s)
	}
}

// TestIdempotentPublish: a retried publish with the same producer id,
// epoch and sequence is not appended twice; a gap is refused.
func TestIdempotentPublish(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "payments", 2, nil)
	var pid struct {
		ProducerID    int64 `json:"producer_id"`
		ProducerEpoch int16 `json:"producer_epoch"`
	}
	if s := c.as(tn, 1, http.MethodPost, "/v1/producer-ids", nil, &pid); s != http.StatusCreated {
		t.Fatalf("producer id: %d", s)
	}
	req := publishReq{
		Messages:   []msg{{Value: []byte("a"), Partition: ptr[int32](1)}, {Value: []byte("b"), Partition: ptr[int32](1)}},
		ProducerID: &pid.ProducerID, ProducerEpoch: &pid.ProducerEpoch, BaseSequence: ptr[int32](0),
	}
	var first, again publishResp
	for b := range 3 {
		out := &again
		if b == 0 {
			out = &first
		}
		if s := c.as(tn, b, http.MethodPost, publishPath("payments"), req, out); s != http.StatusOK {
			t.Fatalf("publish %d: %d", b, s)
		}
	}
	if again.Messages[0].Offset != first.Messages[0].Offset || again.Messages[1].Offset != first.Messages[1].Offset {
		t.Fatalf("retry appended again: first %+v, retry %+v", first, again)
	}
	var rr readResp
	c.as(tn, 0, http.MethodGet, readPath("payments", 1, "offset=0"), nil, &rr)
	if len(rr.Messages) != 2 || rr.HighWatermark != 2 {
		t.Fatalf("partition holds %d messages (hw %d), want 2", len(rr.Messages), rr.HighWatermark)
	}
	req.BaseSequence = ptr[int32](5)
	s, raw := c.call(0, http.MethodPost, publishPath("payments"), tn.KeyID, tn.Secret, req)
	if e := decodeError(t, raw); s != http.StatusConflict || e.Code != "out_of_order_sequence" {
		t.Fatalf("sequence gap: %d %+v", s, e)
	}
}
