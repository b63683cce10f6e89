package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
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
