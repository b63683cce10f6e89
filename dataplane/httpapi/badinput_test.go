package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
)

// TestBadInput: every malformed or refused request gets its specific
// catalogue error and writes nothing.
func TestBadInput(t *testing.T) {
	c := startCell(t, cellOpts{maxBodyBytes: 64 << 10})
	ctx := context.Background()
	tn := c.tenant("acme")
	other := c.tenant("globex")
	wt := c.topic(tn, "orders", 2, map[string]string{"max.message.bytes": "2048"})
	c.topic(other, "secret", 1, nil)
	// A client key that may only read "orders".
	reader, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "reader", Role: "client"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.Owner.CreateACL(ctx, api.CreateACLRequest{Principal: reader.ID, ResourceType: "topic", ResourceName: "orders", Operation: "read"}); err != nil {
		t.Fatal(err)
	}
	// A key that is revoked, once every broker has seen it.
	revoked, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "soon revoked"})
	if err != nil {
		t.Fatal(err)
	}
	c.waitKey(revoked.ID, revoked.Secret, true)
	if _, err := tn.Owner.RevokeAPIKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	c.waitKey(revoked.ID, revoked.Secret, false)
	celltest := func() bool {
		for _, b := range c.brokers {
			v := b.syncer.View()
			if _, err := v.Authenticate(reader.ID, reader.Secret, timeNow()); err != nil {
				return false
			}
			p, _ := v.Authenticate(reader.ID, reader.Secret, timeNow())
			if !v.Allowed(p, "topic", "orders", "read") {
				return false
			}
		}
		return true
	}
	waitFor(t, "the reader key and its ACL on every broker", celltest)

	pub := publishPath("orders")
	big := strings.Repeat("A", 4000) // 3000 bytes decoded: over max.message.bytes
	cases := []struct {
		name         string
		method, path string
		id, secret   string
		body         any
		hdr          []string
		status       int
		code         string
	}{
		{"no credentials", "POST", pub, "", "", `{"messages":[{"value":"YQ=="}]}`, nil, 401, "unauthenticated"},
		{"wrong secret", "POST", pub, tn.KeyID, "wrong", `{"messages":[{"value":"YQ=="}]}`, nil, 401, "unauthenticated"},
		{"unknown key", "GET", readPath("orders", 0, "offset=0"), "SLKAAAAAAAAAAAAAAAA", "x", nil, nil, 401, "unauthenticated"},
		{"revoked key", "POST", pub, revoked.ID, revoked.Secret, `{"messages":[{"value":"YQ=="}]}`, nil, 401, "unauthenticated"},
		{"malformed json", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[`, nil, 400, "malformed_json"},
		{"not json", "POST", pub, tn.KeyID, tn.Secret, `hello`, nil, 400, "malformed_json"},
		{"empty body", "POST", pub, tn.KeyID, tn.Secret, ``, nil, 400, "malformed_json"},
		{"two objects", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ=="}]} {}`, nil, 400, "malformed_json"},
		{"wrong type of messages", "POST", pub, tn.KeyID, tn.Secret, `{"messages":"hello"}`, nil, 400, "invalid_request"},
		{"wrong type of partition", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ==","partition":"one"}]}`, nil, 400, "invalid_request"},
		{"value not base64", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"not base64!"}]}`, nil, 400, "invalid_request"},
		{"unknown field", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ==","colour":"red"}]}`, nil, 400, "unknown_field"},
		{"no messages", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[]}`, nil, 400, "invalid_request"},
		{"wrong content type", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ=="}]}`, []string{"Content-Type", "text/plain"}, 400, "invalid_request"},
		{"reserved header", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ==","headers":[{"key":"sluice-message-id","value":"eA=="}]}]}`, nil, 400, "invalid_request"},
		{"partial idempotence fields", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ=="}],"producer_id":5}`, nil, 400, "invalid_request"},
		{"idempotent over two partitions", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ==","partition":0},{"value":"YQ==","partition":1}],"producer_id":5,"producer_epoch":0,"base_sequence":0}`, nil, 400, "invalid_request"},
		{"partition out of range", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ==","partition":2}]}`, nil, 404, "partition_not_found"},
		{"message too large", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"` + big + `"}]}`, nil, 413, "message_too_large"},
		{"body too large", "POST", pub, tn.KeyID, tn.Secret, `{"messages":[{"value":"` + strings.Repeat("A", 70<<10) + `"}]}`, nil, 413, "body_too_large"},
		{"other tenant's topic", "POST", publishPath("secret"), tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ=="}]}`, nil, 404, "topic_not_found"},
		{"unknown topic", "POST", publishPath("nope"), tn.KeyID, tn.Secret, `{"messages":[{"value":"YQ=="}]}`, nil, 404, "topic_not_found"},
		{"read other tenant's topic", "GET", readPath("secret", 0, "offset=0"), tn.KeyID, tn.Secret, nil, nil, 404, "topic_not_found"},
		{"read unknown topic", "GET", readPath("nope", 0, "offset=0"), tn.KeyID, tn.Secret, nil, nil, 404, "topic_not_found"},
		{"publish without write ACL", "POST", pub, reader.ID, reader.Secret, `{"messages":[{"value":"YQ=="}]}`, nil, 403, "topic_access_denied"},
		{"read unknown partition", "GET", readPath("orders", 7, "offset=0"), tn.KeyID, tn.Secret, nil, nil, 404, "partition_not_found"},
		{"read without offset", "GET", readPath("orders", 0, ""), tn.KeyID, tn.Secret, nil, nil, 400, "invalid_request"},
		{"read negative offset", "GET", readPath("orders", 0, "offset=-3"), tn.KeyID, tn.Secret, nil, nil, 400, "invalid_request"},
		{"read offset past the end", "GET", readPath("orders", 0, "offset=1000"), tn.KeyID, tn.Secret, nil, nil, 416, "offset_out_of_range"},
		{"read zero max_bytes", "GET", readPath("orders", 0, "offset=0&max_bytes=0"), tn.KeyID, tn.Secret, nil, nil, 400, "invalid_fetch_size"},
		{"read bad max_wait_ms", "GET", readPath("orders", 0, "offset=0&max_wait_ms=soon"), tn.KeyID, tn.Secret, nil, nil, 400, "invalid_request"},
		{"read unknown parameter", "GET", readPath("orders", 0, "offset=0&colour=red"), tn.KeyID, tn.Secret, nil, nil, 400, "invalid_request"},
		{"unknown route", "GET", "/v1/nothing", tn.KeyID, tn.Secret, nil, nil, 404, "not_found"},
		{"wrong method", "DELETE", pub, tn.KeyID, tn.Secret, nil, nil, 404, "not_found"},
	}
	var otherMsg string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for b := range c.brokers {
				s, raw := c.call(b, tc.method, tc.path, tc.id, tc.secret, tc.body, tc.hdr...)
				e := decodeError(t, raw)
				if s != tc.status || e.Code != tc.code {
					t.Fatalf("broker %d: %d %+v, want %d %s", b, s, e, tc.status, tc.code)
				}
				// The answer names the topic asked for, and is otherwise
				// the same whether another tenant has a topic of that name.
				switch tc.name {
				case "other tenant's topic":
					otherMsg = e.Message
					if !strings.Contains(e.Message, `"secret"`) {
						t.Errorf("the answer does not name the topic: %q", e.Message)
					}
				case "unknown topic":
					if strings.ReplaceAll(e.Message, `"nope"`, "T") != strings.ReplaceAll(otherMsg, `"secret"`, "T") {
						t.Errorf("unknown topic says %q, another tenant's %q", e.Message, otherMsg)
					}
				}
			}
		})
	}
	// The reader key may read.
	if s, _ := c.call(0, "GET", readPath("orders", 0, "offset=0"), reader.ID, reader.Secret, nil); s != http.StatusOK {
		t.Errorf("reader key read: %d", s)
	}
	// Nothing was written by any of the refused publishes.
	for p := range int32(2) {
		var rr readResp
		c.as(tn, 0, "GET", readPath("orders", p, "offset=0"), nil, &rr)
		if rr.HighWatermark != 0 {
			t.Errorf("partition %d of %s holds %d records after refused publishes", p, wt.Name, rr.HighWatermark)
		}
	}
	// A percent-encoded ':' reaches the same route.
	var res publishResp
	if s := c.as(tn, 0, "POST", "/v1/topics/orders/messages%3Apublish", publishReq{Messages: []msg{{Value: []byte("x")}}}, &res); s != http.StatusOK {
		t.Errorf("publish with %%3A: %d", s)
	}
}
