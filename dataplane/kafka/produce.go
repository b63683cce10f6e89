package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/log"
)

// maxProduceWait bounds how long a produce waits for commit, whatever the
// request's timeout says.
const maxProduceWait = 2 * time.Minute

// commitContext bounds a request that waits for its writes to commit by
// the request's timeout, or maxProduceWait when that is unset or longer.
func (c *conn) commitContext(timeoutMillis int32) (context.Context, context.CancelFunc) {
	wait := time.Duration(timeoutMillis) * time.Millisecond
	if wait <= 0 || wait > maxProduceWait {
		wait = maxProduceWait
	}
	return context.WithTimeout(c.s.ctx, wait)
}

// runAll runs run for every job and returns once all have finished:
// concurrently, since partitions commit independently and a request
// naming several should wait for the slowest rather than their sum; a
// lone job runs on the caller's goroutine.
func runAll[J any](jobs []J, run func(J)) {
	if len(jobs) == 1 {
		run(jobs[0])
		return
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { run(j) })
	}
	wg.Wait()
}

// produceJob is one partition's batch of a produce request.
type produceJob struct {
	part  Partition
	batch []byte
	recs  int32
	out   *kmsg.ProduceResponseTopicPartition
	wait  func() (int64, error) // the batch's outcome, once committed
}

// pendingProduce is a produce request whose valid batches have been handed
// to their partitions; await collects their outcomes and finishProduce
// turns them into the response.
type pendingProduce struct {
	r       *kmsg.ProduceRequest
	v       *cellview.View
	resp    *kmsg.ProduceResponse
	jobs    []produceJob
	ordered bool // every batch went to a frontdoor.Submitter, in order
	cancel  context.CancelFunc
}

// produce validates every partition's batch, appends the valid ones through
// their leaders, all partitions at once, and waits for their commit.
func (c *conn) produce(r *kmsg.ProduceRequest) kmsg.Response {
	p := c.startProduce(r)
	c.awaitProduce(p)
	return c.finishProduce(p)
}

// startProduce validates every partition's batch and hands the valid ones
// to their leaders: a frontdoor.Submitter's at once, in the request's
// order; any other partition's when awaitProduce runs.
func (c *conn) startProduce(r *kmsg.ProduceRequest) *pendingProduce {
	c.awaitTopics(produceNames(r)) // metadatawait.go
	v := c.s.cfg.State.View()
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	ctx, cancel := c.commitContext(r.TimeoutMillis)
	p := &pendingProduce{r: r, v: v, resp: resp, ordered: true, cancel: cancel}
	var jobs []produceJob
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ot := &resp.Topics[i]
		ot.Default()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t, found := v.Topic(c.tenant(), rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			op := &ot.Partitions[j]
			op.Default()
			op.Partition = rp.Partition
			op.BaseOffset = -1
			fail := func(e *catalog.Entry, msg string) {
				op.ErrorCode, op.ErrorMessage = entryCode(e, msg)
			}
			switch {
			case !found || !hasPartition(t.Partitions, rp.Partition):
				fail(catalog.TopicNotFound, "no such topic or partition")
				continue
			case !c.allowed(v, rt.Topic, authz.OpWrite):
				fail(catalog.TopicAccessDenied, "")
				continue
			case r.TransactionID != nil:
				fail(catalog.InvalidRequest, "transactions are not supported yet")
				continue
			}
			if len(rp.Records) > maxMessageBytes(t) {
				fail(catalog.MessageTooLarge, "the record batch is larger than the topic's max.message.bytes")
				continue
			}
			// Framing only: the partition's Produce validates the batch
			// whole, once, on the leader's path.
			h, err := log.CheckClientBatchFraming(rp.Records)
			if err != nil {
				op.ErrorCode, op.ErrorMessage = errCode(err)
				continue
			}
			// Compaction keeps the newest record per key: a keyless
			// record has nothing to be kept by (Kafka's INVALID_RECORD).
			if topicspec.Config(t.Config).Compacted() {
				if err := log.CheckKeyed(rp.Records); err != nil {
					op.ErrorCode, op.ErrorMessage = errCode(err)
					continue
				}
			}
			if h.IsTransactional() {
				fail(catalog.InvalidRequest, "transactional producers are not supported yet")
				continue
			}
			if err := c.checkProduce(len(rp.Records)); err != nil {
				op.ErrorCode, op.ErrorMessage = errCode(err)
				continue
			}
			if h.ProducerID >= 0 && c.s.cfg.ProducerIDs == nil {
				// Without InitProducerId there is no producer id this
				// listener handed out, and its partitions may not dedupe.
				fail(catalog.InvalidRequest, "idempotent producers are not served by this listener; disable idempotence")
				continue
			}
			part, ok := c.awaitOpened(ctx, t, rp.Partition)
			if !ok {
				fail(catalog.NotLeader, "")
				continue
			}
			if node, ok := awaitLeader(ctx, part); !ok || node != c.s.cfg.NodeID {
				if !ok && frontdoor.PartitionNoQuorum(part) {
					// Not a moving leader: none until brokers return.
					op.ErrorCode, op.ErrorMessage = errCode(frontdoor.NoLeader(part, ""))
					continue
				}
				fail(catalog.NotLeader, "")
				if ok {
					op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = int32(node), part.LeaderEpoch()
				} else if electedHere(part) {
					// Serving in a moment: retry here, not after a
					// metadata refresh (franz-go's waits up to 5 s).
					op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = int32(c.s.cfg.NodeID), part.LeaderEpoch()
				}
				continue
			}
			jobs = append(jobs, produceJob{part: part, batch: rp.Records, recs: h.NumRecords, out: op})
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if s, ok := j.part.(frontdoor.Submitter); ok {
			j.wait = s.Submit(ctx, j.batch)
			continue
		}
		p.ordered = false
		j.wait = func() (int64, error) { return j.part.Produce(ctx, j.batch) }
	}
	p.jobs = jobs
	return p
}

// awaitProduce waits for the outcome of every batch of p and writes each
// into the response. Submitted batches commit in parallel already, so
// their waits are taken in turn; a batch of a partition that is no
// Submitter is produced now, all of them at once.
func (c *conn) awaitProduce(p *pendingProduce) {
	run := func(j produceJob) {
		base, err := j.wait()
		if err != nil {
			j.out.ErrorCode, j.out.ErrorMessage = errCode(err)
			var ln frontdoor.LeaderNoder
			if errors.As(err, &ln) {
				if node, ok := ln.LeaderNode(); ok && node != c.s.cfg.NodeID {
					j.out.CurrentLeader.LeaderID, j.out.CurrentLeader.LeaderEpoch = int32(node), j.part.LeaderEpoch()
				}
			}
			if j.out.CurrentLeader.LeaderID < 0 && fencedHere(j.part) {
				// Fenced for its tenant's move: the new home serves it
				// in moments, and this broker's sessions of the tenant
				// are then redirected, naming the new leaders. Naming
				// this broker keeps the client retrying here after its
				// backoff rather than after a metadata refresh (which
				// franz-go spaces by its metadata age, 5 s by default,
				// and which would still name this broker).
				j.out.CurrentLeader.LeaderID, j.out.CurrentLeader.LeaderEpoch = int32(c.s.cfg.NodeID), j.part.LeaderEpoch()
			}
			if ce := catalogued(err); ce.Entry == catalog.Internal {
				c.s.cfg.Logger.Error("produce failed", "remote", c.remote, "err", err)
			}
			return
		}
		j.out.BaseOffset = base
		j.out.LogStartOffset = j.part.LogStartOffset()
	}
	if !p.ordered {
		runAll(p.jobs, run)
		return
	}
	for _, j := range p.jobs {
		run(j)
	}
}

// finishProduce records what p's batches acknowledged and completes its
// response.
func (c *conn) finishProduce(p *pendingProduce) kmsg.Response {
	p.cancel()
	r, v, resp := p.r, p.v, p.resp
	// Record first, then throttle: what was acknowledged counts in full.
	var acked, records int64
	for _, j := range p.jobs {
		if j.out.ErrorCode == 0 {
			acked += int64(len(j.batch))
			records += int64(j.recs)
		}
	}
	c.recordProduce(acked, records)
	if r.Version >= 10 {
		var fenced []Partition
		for _, j := range p.jobs {
			if j.out.ErrorCode == catalog.NotLeader.KafkaCode && fencedHere(j.part) {
				fenced = append(fenced, j.part)
			}
		}
		if len(fenced) > 0 && c.awaitTenantSwitch(resp, fenced) {
			return resp // named the leaders at the tenant's new home
		}
		addLeaderEndpoints(v, resp)
	}
	return resp
}

// addLeaderEndpoints lists the brokers that NOT_LEADER_OR_FOLLOWER answers
// name as current leaders (KIP-951), so a client can move the partition
// without a metadata round trip; clients ignore CurrentLeader without
// them.
func addLeaderEndpoints(v *cellview.View, resp *kmsg.ProduceResponse) {
	named := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.CurrentLeader.LeaderID >= 0 {
				named[p.CurrentLeader.LeaderID] = true
			}
		}
	}
	if len(named) == 0 {
		return
	}
	for _, b := range v.Brokers {
		if named[int32(b.NodeID)] {
			addEndpoint(resp, b.NodeID, b.KafkaAddr)
		}
	}
}

// addEndpoint lists broker node at its Kafka address addr in resp's
// NodeEndpoints (KIP-951), if addr is one.
func addEndpoint(resp *kmsg.ProduceResponse, node int, addr string) {
	if host, port, ok := splitKafkaAddr(addr); ok {
		eb := kmsg.NewProduceResponseBroker()
		eb.NodeID, eb.Host, eb.Port = int32(node), host, port
		resp.Brokers = append(resp.Brokers, eb)
	}
}

// hasPartition reports whether the topic has partition p.
func hasPartition(ps []wire.Partition, p int32) bool {
	for _, x := range ps {
		if int32(x.Partition) == p {
			return true
		}
	}
	return false
}

// produceFailed reports whether any partition of a produce failed.
func produceFailed(r *kmsg.ProduceResponse) bool {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}
