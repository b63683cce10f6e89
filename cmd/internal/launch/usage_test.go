package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/billing"
	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
)

// usageCell is the metering tests' cell: a control plane and three
// broker processes.
type usageCell = procCell

func startUsageCell(t *testing.T) *usageCell { return startProcCell(t, "usage", 3) }

// produceKafka produces n records of a known size through franz-go.
func (c *usageCell) produceKafka(ctx context.Context, topic string, from, n int) {
	c.t.Helper()
	cl := c.kgo(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(2*time.Minute))
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%06d", i), Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.t.Fatalf("produce through kafka: %v", err)
	}
}

// produceKafkaKilling produces n records through franz-go (idempotent,
// one small batch after another) and calls kill once half of them are
// acknowledged, with the rest in flight; it returns when all are.
func (c *usageCell) produceKafkaKilling(ctx context.Context, topic string, from, n int, kill func()) {
	c.t.Helper()
	cl := c.kgo(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(20))
	var acked atomic.Int64
	errs := make(chan error, n)
	killed := false
	for i := from; i < from+n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "x%06d", i), Value: bytes.Repeat([]byte{'x'}, 100)}, func(_ *kgo.Record, err error) {
			acked.Add(1)
			errs <- err
		})
		if !killed && acked.Load() >= int64(n/2) {
			killed = true
			kill()
		}
	}
	if err := cl.Flush(ctx); err != nil {
		c.t.Fatal(err)
	}
	if !killed {
		c.t.Fatal("every record was acknowledged before the kill: nothing was in flight")
	}
	for range n {
		if err := <-errs; err != nil {
			c.t.Fatalf("produce through kafka across the kill: %v", err)
		}
	}
}

// publishHTTP publishes m messages through the HTTP data API, ten per
// request. A message the answer refuses (a retriable error: the tenant's
// produce quota) is sent again, alone with the others refused; the ones
// accepted are not, so nothing is appended twice.
func (c *usageCell) publishHTTP(ctx context.Context, topic string, from, m int) {
	c.t.Helper()
	type msg struct {
		Key   []byte `json:"key"`
		Value []byte `json:"value"`
	}
	for i := from; i < from+m; i += 10 {
		var pending []msg
		for j := i; j < min(i+10, from+m); j++ {
			pending = append(pending, msg{Key: fmt.Appendf(nil, "h%06d", j), Value: bytes.Repeat([]byte{'w'}, 80)})
		}
		err := launch.WaitFor(ctx, "http publish", 30*time.Second, func() error {
			b, _ := json.Marshal(struct {
				Messages []msg `json:"messages"`
			}{pending})
			resp, err := c.dataAPI(ctx, http.MethodPost, "/v1/topics/"+topic+"/messages:publish", b)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var out struct {
				Messages []struct {
					Error *api.Error `json:"error"`
				} `json:"messages"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusMultiStatus) {
				return fmt.Errorf("publish: %s %v", resp.Status, err)
			}
			if len(out.Messages) != len(pending) {
				c.t.Fatalf("publish answered %d results for %d messages", len(out.Messages), len(pending))
			}
			var refused []msg
			for k, r := range out.Messages {
				if r.Error == nil {
					continue
				}
				if !r.Error.Retriable {
					c.t.Fatalf("publish answered a per-message error: %+v", r.Error)
				}
				refused = append(refused, pending[k])
			}
			if pending = refused; len(pending) > 0 {
				return fmt.Errorf("publish: %d messages refused: %+v", len(pending), out.Messages[0].Error)
			}
			return nil
		})
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// readAll fetches every partition of topic from offset 0 to its high
// watermark with raw Fetch requests to the leaders, and returns the
// record-batch bytes and records the brokers sent.
func (c *usageCell) readAll(ctx context.Context, topic string, parts int) (bytesOut, msgsOut int64) {
	c.t.Helper()
	cl := c.kgo()
	for p := range int32(parts) {
		off := int64(0)
		err := launch.WaitFor(ctx, "read partition", 60*time.Second, func() error {
			for {
				mt, err := topicMetadata(ctx, cl, topic)
				if err != nil {
					return err
				}
				leader := mt.Partitions[p].Leader
				req := kmsg.NewPtrFetchRequest()
				req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := cl.Broker(int(leader)).Request(ctx, req)
				if err != nil {
					return err
				}
				fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
				if fp.ErrorCode != 0 {
					return fmt.Errorf("fetch partition %d: error %d", p, fp.ErrorCode)
				}
				b := fp.RecordBatches
				if len(b) == 0 {
					if off >= fp.HighWatermark {
						return nil
					}
					continue
				}
				bytesOut += int64(len(b))
				for len(b) >= 61 {
					n := int(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])) + 12
					base := int64(0)
					for _, x := range b[0:8] {
						base = base<<8 | int64(x)
					}
					last := int64(uint32(b[23])<<24 | uint32(b[24])<<16 | uint32(b[25])<<8 | uint32(b[26]))
					msgsOut += last + 1
					off = base + last + 1
					b = b[n:]
				}
			}
		})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return bytesOut, msgsOut
}

// TestUsageExactAcrossCrashes is issue 19's acceptance test: N records of
// known size through Kafka and M through HTTP, all read K times; a broker
// and the control plane (where the ledger is folded) SIGKILLed midway and
// restarted; the ledger's bytes and messages in and out equal what was
// done, exactly.
func TestUsageExactAcrossCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and three brokers")
	}
	const topic, parts, n, m, k = "metered", 3, 600, 200, 2
	c := startUsageCell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.createTopic(ctx, topic, parts)
	var out, outMsgs int64
	read := func() {
		for range k {
			b, ms := c.readAll(ctx, topic, parts)
			out, outMsgs = out+b, outMsgs+ms
		}
	}

	kill := func() {
		c.procs[1].Signal(syscall.SIGKILL)
		c.cp.Proc.Signal(syscall.SIGKILL)
		c.procs[1].Wait(10 * time.Second)
		c.cp.Proc.Wait(10 * time.Second)
	}
	restart := func() {
		c.startControlPlane()
		c.startBroker(1)
	}

	// A third, then kill broker 2 and the control plane at once, idle.
	c.produceKafka(ctx, topic, 0, n/3)
	c.publishHTTP(ctx, topic, 0, m/2)
	read()
	kill()
	restart()

	// A third with both killed again while records are in flight (the
	// producer retries them on the new leaders), then restarted.
	c.produceKafkaKilling(ctx, topic, n/3, n/3, kill)
	restart()

	// The rest, with the restarted broker back.
	c.produceKafka(ctx, topic, 2*n/3, n-2*n/3)
	c.publishHTTP(ctx, topic, m/2, m-m/2)
	read()

	// What is in the log is what was produced: every batch once.
	in, inMsgs := c.readAll(ctx, topic, parts)
	if inMsgs != n+m {
		t.Fatalf("the topic holds %d records, want %d", inMsgs, n+m)
	}
	want := map[string]int64{"bytes_in": in, "messages_in": n + m, "bytes_out": out + in, "messages_out": outMsgs + inMsgs}

	waitTotals(ctx, t, c.ledgerTotals(ctx), "ledger equal to the traffic", want)
}

// ledgerTotals opens the billing ledger on the cell's database (the pool
// closes when the test ends) and returns a reader of the tenant's totals
// over the two days either side of now.
func (c *usageCell) ledgerTotals(ctx context.Context) func() (map[string]int64, error) {
	c.t.Helper()
	pool, err := pgxpool.New(ctx, c.db.URL)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(pool.Close)
	l := billing.Ledger{DB: pool}
	return func() (map[string]int64, error) {
		from, to := time.Now().Add(-48*time.Hour), time.Now().Add(48*time.Hour)
		return l.Totals(ctx, c.tenant.ID, from, to)
	}
}

// waitTotals waits up to a minute until totals holds want for every meter
// want names, and returns them; what names the wait.
func waitTotals(ctx context.Context, t testing.TB, totals func() (map[string]int64, error), what string, want map[string]int64) map[string]int64 {
	t.Helper()
	var got map[string]int64
	err := launch.WaitFor(ctx, what, 60*time.Second, func() error {
		var err error
		if got, err = totals(); err != nil {
			return err
		}
		for meter, v := range want {
			if got[meter] != v {
				return fmt.Errorf("%s: ledger %d, want %d", meter, got[meter], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v (ledger %v, want %v)", what, err, got, want)
	}
	t.Logf("%s: ledger %v", what, got)
	return got
}
