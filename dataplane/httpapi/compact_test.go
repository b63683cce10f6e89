package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestPublishKeylessToCompactedTopic: a publish with a message without a
// key to a compacted topic is refused whole with invalid_record (400) and
// a message naming the message; keyed messages are published.
func TestPublishKeylessToCompactedTopic(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "latest", 1, map[string]string{"cleanup.policy": "compact"})
	req := publishReq{Messages: []msg{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("no key")}}}
	s, body := c.call(0, http.MethodPost, publishPath("latest"), tn.KeyID, tn.Secret, req)
	e := decodeError(t, body)
	if s != http.StatusBadRequest || e.Code != "invalid_record" || !strings.Contains(e.Message, "messages[1] has no key") {
		t.Fatalf("keyless publish: %d %s", s, body)
	}
	var rr readResp
	if s := c.as(tn, 0, http.MethodGet, readPath("latest", 0, "offset=0"), nil, &rr); s != http.StatusOK || rr.HighWatermark != 0 {
		t.Fatalf("after the refused publish: %d, high watermark %d; nothing should be appended", s, rr.HighWatermark)
	}
	var res publishResp
	if s := c.as(tn, 0, http.MethodPost, publishPath("latest"), publishReq{Messages: req.Messages[:1]}, &res); s != http.StatusOK || res.Messages[0].Offset != 0 {
		t.Fatalf("keyed publish: %d %+v", s, res)
	}
}

// TestReadCompactedTopic: the HTTP read API across compaction's gaps. 3 MiB
// of updates of 10 keys are published to a compacted topic (1 MiB
// segments) and the brokers' cleaners run until the leader compacted;
// reading from offset 0 by next_offset up to the high watermark returns
// fewer messages than were published, in offset order, each at the offset
// and with the value it was published with, and the newest value of every
// key; a read at an offset compaction removed returns the next surviving
// message.
func TestReadCompactedTopic(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	tp := c.topic(tn, "latest", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"})
	published := map[int64]string{}
	newest := map[string]int64{}
	val := strings.Repeat("v", 1000)
	const rounds, per = 60, 50
	for round := range rounds {
		var req publishReq
		for i := range per {
			req.Messages = append(req.Messages, msg{Key: []byte(fmt.Sprintf("key-%d", i%10)), Value: []byte(fmt.Sprintf("%03d/%02d %s", round, i, val))})
		}
		var res publishResp
		if s := c.as(tn, round%3, http.MethodPost, publishPath("latest"), req, &res); s != http.StatusOK {
			t.Fatalf("publish round %d: %d", round, s)
		}
		for i, m := range res.Messages {
			published[m.Offset] = string(req.Messages[i].Value)
			newest[string(req.Messages[i].Key)] = m.Offset
		}
	}
	leader, _ := c.leader(tp.ID, 0)
	celltest.WaitFor(t, time.Minute, "the leader to compact", func() bool {
		for b := range c.brokers {
			if m := c.brokers[b].replicas(); m != nil {
				m.CompactionPass(context.Background())
			}
		}
		r, ok := c.brokers[leader].replicas().Get(tp.ID, 0)
		if !ok {
			return false
		}
		upTo, done := r.CompactedTo()
		return done && upTo > 1<<20/1100
	})

	var rr readResp
	var got []int64
	for off := int64(0); ; {
		if s := c.as(tn, 0, http.MethodGet, readPath("latest", 0, fmt.Sprintf("offset=%d", off)), nil, &rr); s != http.StatusOK {
			t.Fatalf("read at %d: %d", off, s)
		}
		for _, m := range rr.Messages {
			if len(got) > 0 && m.Offset <= got[len(got)-1] {
				t.Fatalf("read offset %d after %d", m.Offset, got[len(got)-1])
			}
			if string(m.Value) != published[m.Offset] {
				t.Fatalf("offset %d holds another value than was published", m.Offset)
			}
			got = append(got, m.Offset)
		}
		if rr.NextOffset >= rr.HighWatermark {
			break
		}
		if rr.NextOffset <= off {
			t.Fatalf("read at %d: next_offset %d does not move", off, rr.NextOffset)
		}
		off = rr.NextOffset
	}
	if len(got) >= rounds*per {
		t.Fatalf("read %d of %d messages: nothing compacted", len(got), rounds*per)
	}
	for k, off := range newest {
		if _, ok := slices.BinarySearch(got, off); !ok {
			t.Fatalf("the newest message of %s, at %d, was not read", k, off)
		}
	}
	// An offset compaction removed: the read returns the next survivor.
	gap, prev := int64(-1), int64(-1)
	for i := 0; i < len(got) && gap < 0; i++ {
		if got[i] > prev+1 {
			gap = prev + 1
		}
		prev = got[i]
	}
	if gap < 0 {
		t.Fatal("no gap in the compacted topic")
	}
	if s := c.as(tn, 1, http.MethodGet, readPath("latest", 0, fmt.Sprintf("offset=%d", gap)), nil, &rr); s != http.StatusOK || len(rr.Messages) == 0 {
		t.Fatalf("read at the gap %d: %d, %d messages", gap, s, len(rr.Messages))
	}
	var first int64 = -1
	for _, m := range rr.Messages {
		if m.Offset >= gap {
			first = m.Offset
			break
		}
	}
	if i, _ := slices.BinarySearch(got, gap); first != got[i] {
		t.Fatalf("read at the gap %d returned %d first, want the next survivor %d", gap, first, got[i])
	}
	t.Logf("read %d of %d messages; a read at the removed offset %d returned %d", len(got), rounds*per, gap, first)
}
