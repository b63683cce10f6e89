package kafka_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/quotas"
)

// TestThrottleAndConnectionLimit: with admission, a produce over the
// tenant's rate is acknowledged with throttle_time_ms and the connection
// is muted that long (KIP-219 versions), or the response itself is
// delayed (Produce v5); a tenant's connections beyond max_connections are
// refused at authentication with a specific error.
//
// The time checks are lower bounds only (the broker must not answer
// sooner), which a slow machine cannot break.
func TestThrottleAndConnectionLimit(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("acme", "")
	ctx := context.Background()
	q, err := b.cp.Operator.AdminQuotas(ctx, tn.Tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	q.ProduceBytesPerSec, q.MaxConnections = 20_000, 2
	if _, err := b.cp.Operator.AdminSetQuotas(ctx, tn.Tenant.ID, q); err != nil {
		t.Fatal(err)
	}
	b.createTopic(t, tn, "slow", 1, nil)
	b.waitForKey(t, tn)
	waitFor(t, "quotas to reach the broker", func() bool {
		wt, ok := b.state.View().Tenant(tn.Tenant.ID)
		return ok && wt.Quotas.MaxConnections == 2
	})

	adm, buckets := newAdmission(t, admission.Config{})
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One broker: its share is the whole quota.
		adm.FollowState(fctx, b.state, func(cs wire.CellState) {
			for _, wt := range cs.Tenants {
				buckets.Set(wt.ID, quotas.Limits{{Rate: float64(wt.Quotas.ProduceBytesPerSec)}}, time.Now())
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the tenant's bucket", func() bool {
		l, ok := buckets.Limits(tn.Tenant.ID)
		return ok && l[quotas.ProduceBytes].Rate == 20_000
	})
	reg := prometheus.NewRegistry()
	addr := b.startServer(t, func(c *kafka.Config) { c.Admission, c.Metrics = adm, reg })

	produce := func(version int16, size int) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = version, -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "slow"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = makeBatch(strings.Repeat("x", size))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}

	c1 := dialRaw(t, addr)
	if r := c1.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	// 20 KB/s with a 10 KB burst: 40 KB leaves 30 KB of debt, 1.5 s.
	sent9 := time.Now()
	resp, err := c1.roundTrip(produce(9, 40_000))
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	took9 := answered.Sub(sent9)
	pr := resp.(*kmsg.ProduceResponse)
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("produce error %d", p.ErrorCode)
	}
	throttle := time.Duration(pr.ThrottleMillis) * time.Millisecond
	if throttle < time.Second {
		t.Fatalf("throttle_time_ms %d, want about 1500", pr.ThrottleMillis)
	}
	// Muted: the next request on the connection is not answered sooner.
	if _, err := c1.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(answered); waited < throttle-10*time.Millisecond {
		t.Fatalf("next response after %v, before the %v throttle ended", waited, throttle)
	}

	// Produce v5 (before KIP-219): the response itself is delayed.
	sent := time.Now()
	resp, err = c1.roundTrip(produce(5, 40_000))
	if err != nil {
		t.Fatal(err)
	}
	pr = resp.(*kmsg.ProduceResponse)
	throttle = time.Duration(pr.ThrottleMillis) * time.Millisecond
	if pr.Topics[0].Partitions[0].ErrorCode != 0 || throttle < time.Second {
		t.Fatalf("v5 produce: %+v", pr)
	}
	waited5 := time.Since(sent)
	if waited5 < throttle-10*time.Millisecond {
		t.Fatalf("v5 response after %v, before its %v throttle ended", waited5, throttle)
	}
	// The request latency metric leaves the throttle out: it is the
	// tenant's own debt (counted in the throttle metric), not the broker's
	// latency, and counting it would page the produce SLO for a tenant over
	// its quota. The broker's own time for each produce lies within what
	// the client saw, less the throttle it waited (1 ms: throttle_time_ms
	// rounds up). A request is observed once its response is written,
	// so the second one may not be counted yet when the client has it.
	var n uint64
	var sum time.Duration
	waitFor(t, "both produces observed", func() bool {
		n, sum = produceLatency(t, reg)
		return n >= 2
	})
	if bound := took9 + waited5 - throttle + time.Millisecond; n != 2 || sum > bound {
		t.Fatalf("sluice_kafka_request_seconds{api=Produce}: %d produces, %v in all; want 2 within %v (the v9 round trip %v, the v5 one %v less its %v throttle)",
			n, sum, bound, took9, waited5, throttle)
	}

	// max_connections = 2: a third authenticated connection is refused.
	c2 := dialRaw(t, addr)
	if r := c2.authenticate(tn.KeyID, tn.Secret); r.ErrorCode != 0 {
		t.Fatalf("second connection: %+v", r)
	}
	c3 := dialRaw(t, addr)
	r := c3.authenticate(tn.KeyID, tn.Secret)
	if r.ErrorCode != 44 || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "max_connections") {
		t.Fatalf("third connection: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
	c3.expectClosed(10 * time.Second)
	if got := adm.Rejections(tn.Tenant.ID, admission.CauseConnections); got != 1 {
		t.Fatalf("connection rejections %v, want 1", got)
	}
	// Closing one frees its slot.
	c2.c.Close()
	waitFor(t, "a freed connection slot", func() bool {
		c4 := dialRaw(t, addr)
		return c4.authenticate(tn.KeyID, tn.Secret).ErrorCode == 0
	})
}

// newAdmission is the admission of broker cell-1-b1 over new, empty quota
// buckets, with cfg's other settings; the buckets are returned to set
// limits in.
func newAdmission(t testing.TB, cfg admission.Config) (*admission.Admission, *quotas.Buckets) {
	t.Helper()
	buckets, err := quotas.New(quotas.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.BrokerID, cfg.Buckets = "cell-1-b1", buckets
	adm, err := admission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return adm, buckets
}

// produceLatency answers how many produces sluice_kafka_request_seconds
// counts in reg and their latencies' sum.
func produceLatency(t *testing.T, reg *prometheus.Registry) (uint64, time.Duration) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "sluice_kafka_request_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "api" && l.GetValue() == "Produce" {
					n += m.GetHistogram().GetSampleCount()
					sum += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return n, time.Duration(sum * float64(time.Second))
}
