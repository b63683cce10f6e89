package launch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/internal/launch"
)

// readHTTP reads every partition of topic from offset 0 to its high
// watermark through broker 0's HTTP data API (forwarded to each
// partition's leader), in pieces of at most maxBytes of batches, and
// returns the messages read.
func (c *usageCell) readHTTP(ctx context.Context, topic string, parts int, maxBytes int) (msgs int64) {
	c.t.Helper()
	for p := range parts {
		off := int64(0)
		err := launch.WaitFor(ctx, "http read of a partition", 60*time.Second, func() error {
			for {
				resp, err := c.dataAPI(ctx, http.MethodGet, fmt.Sprintf("/v1/topics/%s/partitions/%d/messages?offset=%d&max_bytes=%d", topic, p, off, maxBytes), nil)
				if err != nil {
					return err
				}
				var out struct {
					Messages      []json.RawMessage `json:"messages"`
					NextOffset    int64             `json:"next_offset"`
					HighWatermark int64             `json:"high_watermark"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					return fmt.Errorf("read partition %d at %d: %s %v", p, off, resp.Status, err)
				}
				msgs += int64(len(out.Messages))
				off = out.NextOffset
				if off >= out.HighWatermark {
					return nil
				}
			}
		})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return msgs
}

// TestBytesOutOneDefinitionForBothDoors: bytes out are the stored batch
// bytes of the records delivered, on both front doors. Records produced
// through Kafka and HTTP, the whole topic read once through Kafka (raw
// Fetch requests to the leaders, batch by batch) and once through the
// HTTP API (in pieces of a few batches, forwarded by one broker to the
// leaders): after each read the ledger's bytes out have grown by the
// ledger's bytes in, exactly, and messages out by the records read.
func TestBytesOutOneDefinitionForBothDoors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and three brokers")
	}
	const topic, parts, n, m = "doors", 3, 300, 100
	c := startUsageCell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.createTopic(ctx, topic, parts)
	c.produceKafka(ctx, topic, 0, n)
	c.publishHTTP(ctx, topic, 0, m)

	totals := c.ledgerTotals(ctx)

	// Kafka: whole batches, from offset 0 to the high watermark.
	kafkaBytes, kafkaMsgs := c.readAll(ctx, topic, parts)
	if kafkaMsgs != n+m {
		t.Fatalf("kafka read %d records, want %d", kafkaMsgs, n+m)
	}
	// Bytes in are the stored batches, which the Kafka read returned.
	in := kafkaBytes
	waitTotals(ctx, t, totals, "after the kafka read", map[string]int64{"bytes_in": in, "messages_in": n + m, "bytes_out": in, "messages_out": n + m})

	// HTTP: the same topic in pieces of at most 2 KB of batches.
	if got := c.readHTTP(ctx, topic, parts, 2048); got != n+m {
		t.Fatalf("http read %d messages, want %d", got, n+m)
	}
	waitTotals(ctx, t, totals, "after the http read", map[string]int64{"bytes_in": in, "messages_in": n + m, "bytes_out": 2 * in, "messages_out": 2 * (n + m)})
}
