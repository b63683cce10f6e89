package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// TestFetchMeteredOnceWritten: a fetch is counted once its response is
// written to the connection, and synced before the connection's next
// request is served. The fault: the client resets its connection after
// the broker computed the response and before the broker writes it; the
// write fails and nothing is counted. The client's refetch of the same
// offset on a new connection is delivered and counted exactly once,
// with the stored batch bytes it carried, and its count is committed
// in the usage partition before that connection answers its next
// request (no flush is asked for meanwhile: the flusher's interval is an
// hour).
func TestFetchMeteredOnceWritten(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("acme", "")
	b.createTopic(t, tn, "metered", 1, nil)
	b.waitForKey(t, tn)
	prod := b.client(t, tn, kgo.DefaultProduceTopic("metered"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := context.Background()
	const n = 50
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Key: []byte{byte(i)}, Value: make([]byte, 100)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	m := usage.NewMeter(nil)
	l := &celltest.UsageLog{}
	f, err := usage.NewFlusher(usage.FlusherConfig{NodeID: 1, Meter: m, Interval: time.Hour,
		Partition: func() (usage.Appender, bool) { return l, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	var fault atomic.Pointer[func(net.Conn)]
	addr := b.startServer(t, func(c *kafka.Config) {
		c.Usage = m
		kafka.SetBeforeFetchWrite(c, func(nc net.Conn) {
			if h := fault.Swap(nil); h != nil {
				(*h)(nc)
			}
		})
	})
	fetchReq := func() *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.MaxBytes, r.MinBytes, r.MaxWaitMillis, r.SessionEpoch = 12, 1<<20, 1, 100, -1
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 1 << 20
		r.Topics = []kmsg.FetchRequestTopic{{Topic: "metered", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
		return r
	}

	// The fault: the client resets the connection (RST, SO_LINGER 0)
	// between the response's computing and its writing; the hook returns
	// once the broker's socket has the reset.
	lost := dialRaw(t, addr)
	if r := lost.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	serverSide := make(chan net.Conn, 1)
	hook := func(nc net.Conn) {
		if err := lost.c.(*net.TCPConn).SetLinger(0); err != nil {
			t.Error(err)
		}
		lost.c.Close()
		awaitPeerGone(t, nc)
		serverSide <- nc
	}
	fault.Store(&hook)
	lost.send(fetchReq())
	var nc net.Conn
	select {
	case nc = <-serverSide:
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch was not computed")
	}
	// The broker failed the write and closed its end; nothing is
	// counted.
	awaitClosed(t, nc)
	if m.Pending() {
		t.Fatal("a fetch response the client never got was counted")
	}

	// The refetch, delivered: counted once, committed before the next
	// request on its connection is answered.
	rc := dialRaw(t, addr)
	if r := rc.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	resp, err := rc.roundTrip(fetchReq())
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("refetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	apiVersions(t, rc) // served only once the fetch's count is committed
	got := l.Totals(t)
	if got[usage.BytesOut] != int64(len(p.RecordBatches)) || got[usage.MessagesOut] != n {
		t.Fatalf("usage partition holds bytes_out %d, messages_out %d; the client received %d bytes of batches holding %d records",
			got[usage.BytesOut], got[usage.MessagesOut], len(p.RecordBatches), n)
	}
	if m.Pending() {
		t.Fatal("counts left after the delivered fetch's sync")
	}
}

// awaitPeerGone polls nc (the broker's side) until a read reports that
// the peer reset or closed the connection.
func awaitPeerGone(t *testing.T, nc net.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1)
	for time.Now().Before(deadline) {
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := nc.Read(buf)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			_ = nc.SetReadDeadline(time.Time{})
			return
		}
	}
	t.Error("the broker's socket never saw the client's reset")
}

// awaitClosed waits until the broker has closed its side of nc.
func awaitClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	buf := make([]byte, 1)
	celltest.WaitFor(t, 10*time.Second, "the broker to close the connection whose response failed", func() bool {
		_, err := nc.Read(buf)
		return errors.Is(err, net.ErrClosed)
	})
}

// BenchmarkConsumeMetered is a franz-go consumer reading b.N records of
// one partition, with fetch metering off and on in the same run. On, each
// fetch response is counted once written and synced into a usage
// partition in memory before the connection's next request (the cost of
// the sync itself is a Raft commit in tenantd, not measured here).
func BenchmarkConsumeMetered(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metering=%v", on), func(b *testing.B) {
			var o brokerOpts
			l := &celltest.UsageLog{}
			if on {
				o.usage = usage.NewMeter(nil)
				f, err := usage.NewFlusher(usage.FlusherConfig{NodeID: 1, Meter: o.usage, Interval: time.Hour,
					Partition: func() (usage.Appender, bool) { return l, true }})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = f.Close() })
			}
			br := startBroker(b, o)
			tn := br.cp.Signup("bench", "")
			br.createTopic(b, tn, "bench", 1, nil)
			br.waitForKey(b, tn)
			produceN(b, br.client(b, tn, kgo.DefaultProduceTopic("bench")), b.N)
			b.SetBytes(int64(len(benchRecord)))
			b.ResetTimer()
			start := time.Now()
			cons := br.client(b, tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": {0: kgo.NewOffset().AtStart()}}))
			cellstack.ConsumeN(b, cons, b.N)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			if on && o.usage.Pending() {
				b.Fatal("counts left unsynced")
			}
		})
	}
}
