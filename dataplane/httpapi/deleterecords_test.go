package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

func deleteRecordsPath(topic string, p int32) string {
	return fmt.Sprintf("/v1/topics/%s/partitions/%d/records:delete", topic, p)
}

// TestDeleteRecordsHTTP: the data API's DeleteRecords, sent to a broker
// that does not lead, is forwarded to the leader and moves the log start
// on every replica; a read below it is 416; an offset above the high
// watermark is 416 and changes nothing; a viewer key is 403; another
// tenant gets 404 for the topic; a missing before_offset is 400.
func TestDeleteRecordsHTTP(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	wt := c.topic(tn, "orders", 1, nil)
	var msgs []msg
	for i := range 10 {
		msgs = append(msgs, msg{Value: []byte(fmt.Sprint(i)), Partition: ptr[int32](0)})
	}
	if s := c.as(tn, 0, http.MethodPost, publishPath("orders"), publishReq{Messages: msgs}, nil); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	_, follower := c.leader(wt.ID, 0)

	status, body := c.call(follower, http.MethodPost, deleteRecordsPath("orders", 0), tn.KeyID, tn.Secret, map[string]any{"before_offset": 100})
	if status != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("delete beyond the high watermark: %d %s", status, body)
	}
	status, body = c.call(follower, http.MethodPost, deleteRecordsPath("orders", 0), tn.KeyID, tn.Secret, map[string]any{})
	if status != http.StatusBadRequest {
		t.Fatalf("delete without before_offset: %d %s", status, body)
	}

	var out struct {
		LogStartOffset int64 `json:"log_start_offset"`
	}
	if s := c.as(tn, follower, http.MethodPost, deleteRecordsPath("orders", 0), map[string]any{"before_offset": 6}, &out); s != http.StatusOK || out.LogStartOffset != 6 {
		t.Fatalf("delete records before 6: %d %+v", s, out)
	}
	celltest.WaitFor(t, wait, "log start 6 on every replica", func() bool {
		for _, b := range c.brokers {
			r, ok := b.manager.Get(wt.ID, 0)
			if !ok || r.LogStartOffset() != 6 {
				return false
			}
		}
		return true
	})
	if status, body := c.call(follower, http.MethodGet, readPath("orders", 0, "offset=2"), tn.KeyID, tn.Secret, nil); status != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("read below the log start: %d %s", status, body)
	}
	status, body = c.call(follower, http.MethodGet, "/v1/topics/orders/partitions/0/offsets", tn.KeyID, tn.Secret, nil)
	var offs struct {
		LogStartOffset int64 `json:"log_start_offset"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &offs) != nil || offs.LogStartOffset != 6 {
		t.Fatalf("offsets after delete: %d %s", status, body)
	}

	key, err := tn.Owner.CreateAPIKey(context.Background(), api.CreateAPIKeyRequest{Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	c.waitKey(key.ID, key.Secret, true)
	if status, body := c.call(follower, http.MethodPost, deleteRecordsPath("orders", 0), key.ID, key.Secret, map[string]any{"before_offset": 8}); status != http.StatusForbidden {
		t.Fatalf("viewer delete records: %d %s", status, body)
	}
	other := c.tenant("globex")
	if status, body := c.call(0, http.MethodPost, deleteRecordsPath("orders", 0), other.KeyID, other.Secret, map[string]any{"before_offset": 8}); status != http.StatusNotFound {
		t.Fatalf("other tenant's delete records: %d %s", status, body)
	}
	leaderIdx, _ := c.leader(wt.ID, 0)
	r, _ := c.brokers[leaderIdx].manager.Get(wt.ID, 0)
	if s := r.LogStartOffset(); s != 6 {
		t.Fatalf("log start %d after refused deletes", s)
	}
}
