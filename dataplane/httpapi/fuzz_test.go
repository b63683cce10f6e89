package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
)

// FuzzPublishBody feeds arbitrary bytes to the publish decoder and
// planner. Invariants: no panic; a refusal is a catalogue error other
// than internal; an accepted body yields valid client batches, one per
// partition, within max.message.bytes, whose records decode back to the
// request's messages with their message ids.
func FuzzPublishBody(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"key":"YQ==","value":"Yg==","headers":[{"key":"h","value":null}]}]}`,
		`{"messages":[{"value":"Yg==","partition":1,"message_id":"m"},{"key":null,"value":null}]}`,
		`{"messages":[{"value":"Yg==","partition":0}],"producer_id":1,"producer_epoch":0,"base_sequence":0}`,
		`{"messages":[]}`, `{"messages":"x"}`, `{"messages":[{"value":"!!"}]}`, `[1,2]`, `{}`, ``, `{"messages":[{"colour":1}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{cfg: Config{ProducerIDs: fakeIDs{}, Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}}
	topic := &wire.Topic{ID: "t", Name: "t", Config: map[string]string{"max.message.bytes": "4096"},
		Partitions: []wire.Partition{{Partition: 0}, {Partition: 1}, {Partition: 2}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req publishRequest
		err := catalog.DecodeJSON(body, &req, 1<<20)
		var prod records.Producer
		if err == nil {
			prod, err = s.producerOf(&req)
		}
		var batches []*partBatch
		if err == nil {
			batches, err = s.plan(&req, topic, prod)
		}
		if err != nil {
			var ce *catalog.Error
			if !errors.As(err, &ce) || ce.Entry == catalog.Internal {
				t.Fatalf("refusal %v is not a specific catalogue error", err)
			}
			return
		}
		n := 0
		for _, b := range batches {
			if len(b.batch) > 4096 {
				t.Fatalf("batch of %d bytes", len(b.batch))
			}
			if _, err := log.ValidateClientBatch(b.batch); err != nil {
				t.Fatal(err)
			}
			recs, _, err := records.Decode(b.batch, 0, 0)
			if err != nil || len(recs) != len(b.idx) {
				t.Fatalf("decode: %d records, %v", len(recs), err)
			}
			for k, i := range b.idx {
				id, ok := recs[k].HeaderValue(MessageIDHeader)
				if !ok || string(id) != req.Messages[i].MessageID || *req.Messages[i].Partition != b.part {
					t.Fatalf("message %d: id %q, want %q", i, id, req.Messages[i].MessageID)
				}
			}
			n += len(b.idx)
		}
		if n != len(req.Messages) {
			t.Fatalf("%d of %d messages planned", n, len(req.Messages))
		}
	})
}

type fakeIDs struct{}

func (fakeIDs) Next(context.Context) (int64, error) { return 1, nil }
