package kafka_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// gatedPartitions holds every produce's commit until gate closes, and
// counts the batches handed to a partition. With submit false its
// partitions only Produce (they are no frontdoor.Submitter), and a batch
// is handed over when Produce is called.
type gatedPartitions struct {
	inner  kafka.Partitions
	gate   chan struct{}
	open   sync.Once
	submit bool
	handed atomic.Int32
}

// release lets every held produce commit.
func (g *gatedPartitions) release() { g.open.Do(func() { close(g.gate) }) }

// hold waits for the gate, or for ctx.
func (g *gatedPartitions) hold(ctx context.Context) error {
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedPartitions) Get(topicID string, part int32) (kafka.Partition, bool) {
	p, ok := g.inner.Get(topicID, part)
	if !ok {
		return nil, false
	}
	if g.submit {
		return gatedSubmitter{gatedProducer{p, g}}, true
	}
	return gatedProducer{p, g}, true
}

type gatedProducer struct {
	kafka.Partition
	g *gatedPartitions
}

func (p gatedProducer) Produce(ctx context.Context, batch []byte) (int64, error) {
	p.g.handed.Add(1)
	if err := p.g.hold(ctx); err != nil {
		return 0, err
	}
	return p.Partition.Produce(ctx, batch)
}

type gatedSubmitter struct{ gatedProducer }

func (p gatedSubmitter) Submit(ctx context.Context, batch []byte) func() (int64, error) {
	wait := p.Partition.(frontdoor.Submitter).Submit(ctx, batch)
	p.g.handed.Add(1)
	return func() (int64, error) {
		if err := p.g.hold(ctx); err != nil {
			return 0, err
		}
		return wait()
	}
}

// pipelineConn is an authenticated raw connection to a listener over
// gated partitions of the two-partition topic "orders".
func pipelineConn(t *testing.T, submit bool) (*rawConn, *gatedPartitions) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 2, nil)
	b.waitForKey(t, a)
	g := &gatedPartitions{inner: b.store, gate: make(chan struct{}), submit: submit}
	addr := b.startServer(t, func(c *kafka.Config) { c.Partitions = g })
	t.Cleanup(g.release) // before the listener's cleanup, which waits for it
	rc := dialRaw(t, addr)
	if resp := rc.authenticate(a.KeyID, a.Secret); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	return rc, g
}

func ordersProduce(partition int32, values ...string) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 60000
	r.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: makeBatch(values...)}}}}
	return r
}

// receiveNth reads the next response and checks that it answers the
// request sent with correlation id corr.
func receiveNth(t *testing.T, rc *rawConn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	resp, err := rc.receiveFor(req, corr)
	if err != nil {
		t.Fatalf("read the response to request %d: %v", corr, err)
	}
	return resp
}

// expectNoResponse fails if a response arrives within d.
func expectNoResponse(t *testing.T, rc *rawConn, d time.Duration) {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	if n, _ := rc.c.Read(b[:]); n > 0 {
		t.Fatal("a response arrived before the first produce committed")
	}
}

// TestProduceRequestsPipelined: a connection's produce requests are handed
// to their partitions as they arrive, before the earlier ones commit;
// their responses, and that of a Metadata request sent behind them, come
// in request order, with each partition's batches in the order sent.
func TestProduceRequestsPipelined(t *testing.T) {
	rc, g := pipelineConn(t, true)
	first := rc.corr + 1
	reqs := []kmsg.Request{ordersProduce(0, "a", "b"), ordersProduce(1, "c"), ordersProduce(0, "d"), kmsg.NewPtrMetadataRequest()}
	for _, r := range reqs {
		rc.send(r)
	}
	waitFor(t, "the three produces handed to their partitions", func() bool { return g.handed.Load() == 3 })
	expectNoResponse(t, rc, 200*time.Millisecond)
	g.release()
	wantBase := []int64{0, 0, 2}
	for i, r := range reqs {
		resp := receiveNth(t, rc, r, first+int32(i))
		pr, ok := resp.(*kmsg.ProduceResponse)
		if !ok {
			continue
		}
		p := pr.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != wantBase[i] {
			t.Fatalf("produce %d: code %d base offset %d, want 0 and %d", i, p.ErrorCode, p.BaseOffset, wantBase[i])
		}
	}
}

// TestProduceWithoutSubmitWaitsItsTurn: a partition that cannot take
// batches in two steps gets a connection's next produce only once the
// previous one is answered, as every request was served before.
func TestProduceWithoutSubmitWaitsItsTurn(t *testing.T) {
	rc, g := pipelineConn(t, false)
	first := rc.corr + 1
	reqs := []kmsg.Request{ordersProduce(0, "a"), ordersProduce(1, "b")}
	for _, r := range reqs {
		rc.send(r)
	}
	waitFor(t, "the first produce handed to its partition", func() bool { return g.handed.Load() == 1 })
	expectNoResponse(t, rc, 200*time.Millisecond)
	if n := g.handed.Load(); n != 1 {
		t.Fatalf("%d produces handed over while the first waits, want 1", n)
	}
	g.release()
	for i, r := range reqs {
		p := receiveNth(t, rc, r, first+int32(i)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("produce %d: code %d base offset %d", i, p.ErrorCode, p.BaseOffset)
		}
	}
}
