package replicated

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// produceN produces n records (value = index) idempotently with acks=all
// and returns how many landed in each partition.
func produceN(t *testing.T, c *cell, tn *cptest.Tenant, topic string, parts, n int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	prod := c.client(t, tn, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10))
	counts := make([]int64, parts)
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%997), Value: strconv.AppendInt(nil, int64(i), 10)}
		prod.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			if r.ProducerID < 0 {
				firstErr = errors.New("the producer did not produce idempotently")
			}
			counts[r.Partition]++
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	prod.Close()
	return counts
}

// cutter is a dialer whose connections can all be cut at once, after
// which it refuses to dial: a client that vanishes from the network
// without leaving its group.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (k *cutter) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cut {
		return nil, errors.New("cut off")
	}
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, nc)
	}
	return nc, err
}

func (k *cutter) cutAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = true
	for _, nc := range k.conns {
		nc.Close()
	}
}

// processed records which offsets of each partition some consumer
// processed.
type processed struct {
	mu    sync.Mutex
	seen  [][]bool
	total atomic.Int64 // distinct records processed
	dups  atomic.Int64
}

func newProcessed(counts []int64) *processed {
	p := &processed{}
	for _, n := range counts {
		p.seen = append(p.seen, make([]bool, n))
	}
	return p
}

func (p *processed) add(t *testing.T, r *kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(r.Partition) >= len(p.seen) || r.Offset < 0 || r.Offset >= int64(len(p.seen[r.Partition])) {
		t.Errorf("record at %d/%d beyond what was produced", r.Partition, r.Offset)
		return
	}
	if p.seen[r.Partition][r.Offset] {
		p.dups.Add(1)
		return
	}
	p.seen[r.Partition][r.Offset] = true
	p.total.Add(1)
}

// gaps lists, per partition, the first offset below end nobody processed.
func (p *processed) firstGap(part int, end int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for o := int64(0); o < end; o++ {
		if !p.seen[part][o] {
			return o
		}
	}
	return -1
}

// committed reads the group's committed offsets of the topic with a raw
// OffsetFetch (v8, the multi-group form).
func committed(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, parts int) ([]int64, error) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = topic
	for p := range parts {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make([]int64, parts)
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, tt := range g.Topics {
			for _, p := range tt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, err
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// TestConsumerGroupSurvivesKilledMember: three franz-go consumers of one
// group (cooperative-sticky, franz-go's default) read a 12-partition
// topic of 100,000 idempotently produced records. One consumer vanishes
// from the network midway without leaving; its session expires, the
// group rebalances, and the other two take over from its commits. Every
// record is processed at least once, and per partition the processed
// offsets have no gap up to the final committed offset, which is the end
// of the partition. A commit with the generation before the rebalance is
// rejected with ILLEGAL_GENERATION.
func TestConsumerGroupSurvivesKilledMember(t *testing.T) {
	const (
		n     = 100_000
		parts = 12
		topic = "events"
		group = "indexers"
	)
	c, tn := startReadyGroupCell(t, parts, topic, 3)
	counts := produceN(t, c, tn, topic, parts, n)
	t.Logf("produced %v", counts)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	proc := newProcessed(counts)
	killed := make(chan struct{})
	type consumer struct {
		cl     *kgo.Client
		cut    *cutter
		cancel context.CancelFunc
		done   chan struct{}
	}
	consumers := make([]*consumer, 3)
	for i := range consumers {
		cu := &cutter{}
		cl := c.client(t, tn, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Dialer(cu.dial),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond), kgo.RebalanceTimeout(10*time.Second),
			kgo.AutoCommitInterval(300*time.Millisecond), kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchMaxBytes(64<<10),
			kgo.ClientID(fmt.Sprintf("consumer-%d", i)))
		cctx, ccancel := context.WithCancel(ctx)
		co := &consumer{cl: cl, cut: cu, cancel: ccancel, done: make(chan struct{})}
		consumers[i] = co
		go func() {
			defer close(co.done)
			for cctx.Err() == nil {
				// Everyone holds at a third until the victim is gone, so
				// the kill always lands midway.
				if proc.total.Load() >= n/3 {
					select {
					case <-killed:
					case <-cctx.Done():
						return
					}
				}
				fs := cl.PollRecords(cctx, 500)
				fs.EachRecord(func(r *kgo.Record) { proc.add(t, r) })
			}
		}()
	}
	celltest.WaitFor(t, 90*time.Second, "a third of the records processed", func() bool { return proc.total.Load() >= n/3 })
	victim := consumers[1]
	_, genBefore := consumers[0].cl.GroupMetadata()
	victim.cut.cutAll()
	victim.cancel()
	<-victim.done
	close(killed)
	t.Logf("cut consumer-1 off at %d records processed (generation %d)", proc.total.Load(), genBefore)

	celltest.WaitFor(t, 120*time.Second, "every record processed and committed", func() bool {
		if proc.total.Load() < n {
			return false
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		got, err := committed(cctx, t, consumers[0].cl, group, topic, parts)
		if err != nil {
			return false
		}
		for p := range parts {
			if got[p] != counts[p] {
				return false
			}
		}
		return true
	})
	for p := range parts {
		if gap := proc.firstGap(p, counts[p]); gap >= 0 {
			t.Fatalf("partition %d: offset %d below the committed end %d was never processed", p, gap, counts[p])
		}
	}

	// A live member's commit with a generation from before the rebalance
	// is fenced. (Retried while the group is between generations, which a
	// slow machine can cause at any time.)
	var gen int32
	celltest.WaitFor(t, 60*time.Second, "a stale-generation commit to be answered ILLEGAL_GENERATION", func() bool {
		var member string
		member, gen = consumers[0].cl.GroupMetadata()
		if gen <= genBefore {
			return false
		}
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, genBefore, member
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, consumers[0].cl)
		if err != nil {
			return false
		}
		switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
		case kerr.IllegalGeneration.Code:
			return true
		case kerr.RebalanceInProgress.Code, kerr.UnknownMemberID.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
			return false
		default:
			t.Fatalf("stale-generation commit by %s (generation %d, current %d) answered %v, want ILLEGAL_GENERATION",
				member, genBefore, gen, kerr.ErrorForCode(code))
			return false
		}
	})
	if got, err := committed(ctx, t, consumers[0].cl, group, topic, parts); err != nil || got[0] != counts[0] {
		t.Fatalf("after the fenced commit, partition 0 is committed at %v (%v), want %d", got, err, counts[0])
	}
	t.Logf("processed %d records (%d more than once); generation %d → %d", proc.total.Load(), proc.dups.Load(), genBefore, gen)
	for _, co := range consumers {
		co.cancel()
		<-co.done
	}
}
