package replicated

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/kafka"
)

// Ids come from the control plane in blocks, never twice, and
// InitProducerId hands them out with epoch 0.
func TestInitProducerID(t *testing.T) {
	c, tn := startCell(t, 1, "ids")
	cl := c.client(t, tn)
	ctx := context.Background()
	seen := map[int64]bool{}
	for i := 0; i < 250; i++ { // more than two blocks of 100
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = int16(i % 5)
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("init producer id v%d: %+v (seen before: %v)", req.Version, resp, seen[resp.ProducerID])
		}
		seen[resp.ProducerID] = true
	}
	txn := "tx"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = &txn
	raw, err := cl.Broker(1).Request(ctx, req) // straight to a broker: no transaction coordinator lookup
	if err != nil {
		t.Fatal(err)
	}
	if resp := raw.(*kmsg.InitProducerIDResponse); resp.ErrorCode == 0 {
		t.Fatalf("transactional init producer id served: %+v", resp)
	}
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range av.ApiKeys {
		found = found || (k.ApiKey == 22 && k.MinVersion == 0 && k.MaxVersion == 4)
	}
	if !found {
		t.Fatalf("InitProducerId v0-4 not advertised: %+v", av.ApiKeys)
	}
}

func TestProducerIDBlocks(t *testing.T) {
	calls := 0
	fail := false
	b := &kafka.ProducerIDBlocks{Size: 3, Allocate: func(_ context.Context, n int) (int64, error) {
		if fail {
			return 0, errors.New("control plane away")
		}
		calls++
		return int64(1000 * calls), nil
	}}
	var got []int64
	for i := 0; i < 7; i++ {
		id, err := b.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	want := []int64{1000, 1001, 1002, 2000, 2001, 2002, 3000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ids %v, want %v", got, want)
		}
	}
	fail = true
	b.Next(context.Background())
	b.Next(context.Background())
	if _, err := b.Next(context.Background()); err == nil {
		t.Fatal("no error with the block used up and the control plane away")
	}
}
