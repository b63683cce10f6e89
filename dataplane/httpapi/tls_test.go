package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTLSCell: with TLS on, the data API answers over HTTPS with the CA,
// forwards to the partition's leader over HTTPS (trusting the CA), and a
// plaintext request on its port is refused; the Kafka listener of the same
// cell serves SASL_SSL to franz-go.
func TestTLSCell(t *testing.T) {
	c := startCell(t, cellOpts{tls: true})
	tn := c.tenant("acme")
	wt := c.topic(tn, "orders", 1, nil)
	_, follower := c.leader(wt.ID, 0)

	publishReadVia(c, tn, follower, "orders", "over https")
	if m := c.metrics(follower); !strings.Contains(m, `sluice_http_forwards_total{outcome="answered",route="/v1/topics/:topic/messages:publish"} 1`) {
		t.Fatalf("the publish was not forwarded: %s", m)
	}

	req, err := http.NewRequest(http.MethodGet, "http://"+c.brokers[follower].httpAddr+readPath("orders", 0, "offset=0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(tn.KeyID, tn.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "over https") {
			t.Fatalf("plaintext request on the TLS port: %d %s", resp.StatusCode, body)
		}
	}

	cl := c.kafkaClient(tn, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("over sasl_ssl")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	var got []string
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %q over SASL_SSL before the deadline", got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch over SASL_SSL: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if got[0] != "over https" || got[1] != "over sasl_ssl" {
		t.Fatalf("consumed %q", got)
	}
}
