package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// TestReadMeteredAsStoredBatches: an HTTP read's bytes out are the
// stored batch bytes of the messages it returns, as a Kafka fetch's are:
// a partition read whole, in pieces of one batch, bills exactly the
// batches' bytes (what bytes in counts); a read from inside a batch
// bills that batch's share for the records returned
// (usage.BatchShare); a read whose client is gone between the answer's
// computing and its writing bills nothing, and the client's retry bills
// once.
func TestReadMeteredAsStoredBatches(t *testing.T) {
	meters := []*usage.Meter{usage.NewMeter(nil), usage.NewMeter(nil), usage.NewMeter(nil)}
	logs := make([]*celltest.UsageLog, len(meters))
	for i, m := range meters {
		logs[i] = &celltest.UsageLog{}
		f, err := usage.NewFlusher(usage.FlusherConfig{NodeID: i + 1, Meter: m, Interval: time.Hour,
			Partition: func() (usage.Appender, bool) { return logs[i], true }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
	}
	c := startCell(t, cellOpts{meters: meters})
	tn := c.tenant("acme")
	wt := c.topic(tn, "metered", 1, nil)
	lead, _ := c.leader(wt.ID, 0)

	// Three batches (one per publish) of 10, 7 and 13 messages.
	for i, n := range []int{10, 7, 13} {
		var req publishReq
		for j := range n {
			req.Messages = append(req.Messages, msg{Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: bytes.Repeat([]byte{'v'}, 37+11*j)})
		}
		if st, body := c.call(lead, http.MethodPost, publishPath("metered"), tn.KeyID, tn.Secret, req); st != http.StatusOK {
			t.Fatalf("publish: %d %s", st, body)
		}
	}
	// The stored batches, as the leader's replica holds them.
	r, ok := c.brokers[lead].replica(wt.ID, 0)
	if !ok {
		t.Fatal("no leader replica")
	}
	sl, _, err := r.Fetch(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sl.AppendTo(nil)
	sl.Release()
	if err != nil {
		t.Fatal(err)
	}
	var batches []log.Header
	var in int64
	for len(data) > 0 {
		h, err := log.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, h)
		in += h.Size()
		data = data[h.Size():]
	}
	if len(batches) != 3 {
		t.Fatalf("%d batches stored, want 3", len(batches))
	}

	read := func(ctx context.Context, offset int64) (readResp, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.brokers[lead].httpAddr+readPath("metered", 0, fmt.Sprintf("offset=%d&max_bytes=1", offset)), nil)
		req.SetBasicAuth(tn.KeyID, tn.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return readResp{}, err
		}
		defer resp.Body.Close()
		var out readResp
		if resp.StatusCode != http.StatusOK {
			return out, fmt.Errorf("read at %d: %s", offset, resp.Status)
		}
		return out, json.NewDecoder(resp.Body).Decode(&out)
	}
	billed := func(what string, bytesOut, messagesOut int64) {
		t.Helper()
		var got map[string]int64
		celltest.WaitFor(t, 20*time.Second, what, func() bool {
			if err := meters[lead].Sync(context.Background()); err != nil {
				return false
			}
			got = logs[lead].Totals(t)
			return got[usage.BytesOut] >= bytesOut && got[usage.MessagesOut] >= messagesOut
		})
		if got[usage.BytesOut] != bytesOut || got[usage.MessagesOut] != messagesOut {
			t.Fatalf("%s: bytes_out %d, messages_out %d; want %d and %d", what, got[usage.BytesOut], got[usage.MessagesOut], bytesOut, messagesOut)
		}
	}

	// The partition in pieces of one batch: bytes out = bytes in.
	var msgs int64
	for off := int64(0); off < batches[2].NextOffset(); {
		out, err := read(context.Background(), off)
		if err != nil {
			t.Fatal(err)
		}
		msgs += int64(len(out.Messages))
		off = out.NextOffset
	}
	billed("the partition read in pieces", in, 30)
	if msgs != 30 {
		t.Fatalf("read %d messages, want 30", msgs)
	}

	// From inside the last batch: its share for the records from there.
	h := batches[2]
	from := 5
	out, err := read(context.Background(), h.BaseOffset+int64(from))
	if err != nil || len(out.Messages) != int(h.NumRecords)-from {
		t.Fatalf("read inside a batch: %d messages, %v", len(out.Messages), err)
	}
	share := usage.BatchShare(h.Size(), from, int(h.NumRecords), int(h.NumRecords))
	if share <= 0 || share >= h.Size() {
		t.Fatalf("share %d of a batch of %d bytes", share, h.Size())
	}
	in2, msgs2 := in+share, int64(30+int(h.NumRecords)-from)
	billed("a read from inside a batch", in2, msgs2)

	// The fault: the client gives up after the answer is computed and
	// before it is written; the hook returns once the broker's request
	// has ended.
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	c.brokers[lead].http.BeforeReadWrite(func(r *http.Request) {
		cancel()
		select {
		case <-r.Context().Done():
			ended <- nil
		case <-time.After(10 * time.Second):
			ended <- errors.New("the broker did not see the client leave")
		}
	})
	if _, err := read(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned read: %v, want the client's cancellation", err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	c.brokers[lead].http.BeforeReadWrite(func(*http.Request) {})
	// The retry, delivered: the first batch once.
	if out, err := read(context.Background(), 0); err != nil || len(out.Messages) != int(batches[0].NumRecords) {
		t.Fatalf("the retry: %d messages, %v", len(out.Messages), err)
	}
	billed("the retry of an abandoned read", in2+batches[0].Size(), msgs2+int64(batches[0].NumRecords))
}
