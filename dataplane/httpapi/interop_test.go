package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/dataplane/httpapi"
)

// TestInteropWithKafkaClients: a message published over HTTP reaches a
// franz-go consumer with its key, value, headers and message id; records a
// franz-go producer sends, compressed with every codec, read back over
// HTTP the same.
func TestInteropWithKafkaClients(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "mixed", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	// HTTP → Kafka.
	req := publishReq{Messages: []msg{
		{Key: []byte("k1"), Value: []byte("from http 1"), Headers: []hdr{{Key: "a", Value: []byte("1")}}, MessageID: "m-1"},
		{Key: []byte("k2"), Value: []byte("from http 2")},
	}}
	var res publishResp
	if s := c.as(tn, 1, http.MethodPost, publishPath("mixed"), req, &res); s != http.StatusOK {
		t.Fatalf("publish: %d", s)
	}
	cons := c.kafkaClient(tn, kgo.ConsumeTopics("mixed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	for len(got) < 2 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r })
	}
	for i, m := range req.Messages {
		r := got[string(m.Key)]
		if r == nil {
			t.Fatalf("franz-go did not read message %d", i)
		}
		want := append(append([]kgo.RecordHeader{}, toKgo(m.Headers)...), kgo.RecordHeader{Key: httpapi.MessageIDHeader, Value: []byte(res.Messages[i].MessageID)})
		if !bytes.Equal(r.Value, m.Value) || r.Partition != res.Messages[i].Partition || r.Offset != res.Messages[i].Offset || fmt.Sprint(r.Headers) != fmt.Sprint(want) {
			t.Errorf("franz-go read %+v for %+v (%+v)", r, m, res.Messages[i])
		}
	}

	// Kafka → HTTP, with each codec.
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		prod := c.kafkaClient(tn, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("mixed"), kgo.ProducerLinger(50*time.Millisecond))
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i%4)), Value: bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 10),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(fmt.Sprint(codec))}}})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("franz-go produce: %v", err)
		}
		for _, r := range recs {
			var rr readResp
			if s := c.as(tn, 2, http.MethodGet, readPath("mixed", r.Partition, fmt.Sprintf("offset=%d&max_bytes=1", r.Offset)), nil, &rr); s != http.StatusOK {
				t.Fatalf("read: %d", s)
			}
			if len(rr.Messages) == 0 {
				t.Fatalf("no message at %d/%d", r.Partition, r.Offset)
			}
			m := rr.Messages[0]
			if m.Offset != r.Offset || !bytes.Equal(m.Key, r.Key) || !bytes.Equal(m.Value, r.Value) || m.TimestampMs != r.Timestamp.UnixMilli() ||
				len(m.Headers) != 1 || m.Headers[0].Key != "codec" || !bytes.Equal(m.Headers[0].Value, r.Headers[0].Value) || m.MessageID != "" {
				t.Fatalf("HTTP read %+v for franz-go's %+v", m, r)
			}
		}
	}
}

func toKgo(hs []hdr) []kgo.RecordHeader {
	out := []kgo.RecordHeader{}
	for _, h := range hs {
		out = append(out, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return out
}
