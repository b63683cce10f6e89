package replicated

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestKcatProducerInFlight: librdkafka's producer (kcat -P) keeps up to
// five small produce requests in flight on each connection, which the
// listener hands to Raft before the earlier ones commit. Every record is
// stored once, each partition's in the order sent. (librdkafka 2.0.2's
// idempotent producer was seen to keep one request in flight here; the
// idempotent case is TestIdempotentProducesInFlight's.)
func TestKcatProducerInFlight(t *testing.T) {
	kcat := testkit.Kcat(t)
	const (
		n     = 5000
		parts = 4
		topic = "inflight"
	)
	c, tn := startCell(t, parts, topic)
	for p := range parts {
		c.cell.WaitLeader(p, 30*time.Second)
	}
	sasl := kcatSASL(c, tn)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "k%d:%d\n", i%101, i)
	}
	// Small batches and no linger: many requests, five in flight.
	produce := exec.CommandContext(ctx, kcat, append(sasl, "-P", "-t", topic, "-K", ":",
		"-X", "enable.idempotence=false", "-X", "max.in.flight=5",
		"-X", "linger.ms=0", "-X", "batch.num.messages=10")...)
	var perr bytes.Buffer
	produce.Stdin, produce.Stderr = &in, &perr
	if err := produce.Run(); err != nil || strings.Contains(strings.ToLower(perr.String()), "fail") {
		t.Fatalf("kcat -P: %v\nstderr:\n%s", err, perr.String())
	}

	consume := exec.CommandContext(ctx, kcat, append(sasl, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%p %o %s\n")...)
	var out, cerr bytes.Buffer
	consume.Stdout, consume.Stderr = &out, &cerr
	if err := consume.Run(); err != nil {
		t.Fatalf("kcat -C: %v\nstderr:\n%s", err, cerr.String())
	}
	last := make([]int64, parts) // the last value read from each partition
	next := make([]int64, parts) // the next offset of each partition
	for p := range parts {
		last[p] = -1
	}
	seen := make([]bool, n)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var p, off, v int64
		if _, err := fmt.Sscanf(l, "%d %d %d", &p, &off, &v); err != nil || p < 0 || p >= parts || v < 0 || v >= n {
			t.Fatalf("unexpected kcat line %q: %v", l, err)
		}
		switch {
		case off != next[p]:
			t.Fatalf("partition %d: offset %d, want %d", p, off, next[p])
		case seen[v]:
			t.Fatalf("record %d stored twice", v)
		case v <= last[p]:
			t.Fatalf("partition %d: record %d after %d, out of the order sent", p, v, last[p])
		}
		next[p]++
		last[p], seen[v] = v, true
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("record %d never stored (kcat -P stderr:\n%s)", v, perr.String())
		}
	}
}

// TestIdempotentProducesInFlight: an idempotent producer's three produce
// requests to one partition, sent on one connection without waiting (as
// Java's producer does, up to five), are handed to Raft in turn: each
// passes its sequence check, they are stored in the order sent and
// answered in that order.
func TestIdempotentProducesInFlight(t *testing.T) {
	c, tn := startCell(t, 1, "ordered")
	leader := c.cell.WaitLeader(0, 30*time.Second)
	rc := dialSASL(t, c.addrs[leader], tn.KeyID, tn.Secret)
	if code, msg := rc.sasl(); code != 0 {
		t.Fatalf("authenticate: %d %s", code, msg)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.ProducerID, init.ProducerEpoch = 4, -1, -1
	raw, err := rc.roundTrip(init)
	if err != nil {
		t.Fatal(err)
	}
	pid := raw.(*kmsg.InitProducerIDResponse)
	if pid.ErrorCode != 0 {
		t.Fatalf("init producer id: %+v", pid)
	}
	first := rc.corr + 1
	reqs := make([]*kmsg.ProduceRequest, 3)
	for i := range reqs {
		seq := int32(2 * i)
		reqs[i] = produceRequest("ordered", 0, celltest.IdempotentBatch(pid.ProducerID, pid.ProducerEpoch, seq,
			fmt.Appendf(nil, "%d", seq), fmt.Appendf(nil, "%d", seq+1)))
		rc.send(reqs[i])
	}
	for i, req := range reqs {
		raw, err := rc.receive(req, first+int32(i))
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		resp := raw.(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("produce %d: code %d base offset %d, want 0 and %d", i, p.ErrorCode, p.BaseOffset, 2*i)
		}
	}
}
