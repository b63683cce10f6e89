package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

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
