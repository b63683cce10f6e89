package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest/history"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Workload runs keyed idempotent producers (acks=all) and consumers against
// the cluster's topic, recording every acknowledgement and every poll in a
// Checker.
type Workload struct {
	cfg  Config
	c    *Cluster
	chk  *history.Checker
	tr   *Trimmer // nil without retention and DeleteRecords
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup
	// counters for the summary
	produced, failed, fetchErrs, sessions, assigns, skips atomic.Int64
	// errMu guards errKinds: fetch errors by kind, for the summary.
	errMu    sync.Mutex
	errKinds map[string]int
}

// fetchError counts an error a poll returned.
func (w *Workload) fetchError(sess string, p int32, err error) {
	w.fetchErrs.Add(1)
	kind := fmt.Sprintf("%T", err)
	var ke *kerr.Error
	if errors.As(err, &ke) {
		kind = ke.Message
	}
	w.errMu.Lock()
	w.errKinds[kind]++
	w.errMu.Unlock()
	w.log.Debug("fetch error", "session", sess, "partition", p, "err", err)
}

// FetchErrors describes the fetch errors by kind.
func (w *Workload) FetchErrors() string {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	var parts []string
	for k, n := range w.errKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (c *Cluster) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap...),
		kgo.SASL(plain.Auth{User: c.KeyID, Pass: c.Secret}.AsMechanism()),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(2 * time.Minute),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, extra...)
}

// StartWorkload starts cfg.Producers producers and cfg.Consumers consumers.
func StartWorkload(cfg Config, c *Cluster, chk *history.Checker, tr *Trimmer, log *slog.Logger) *Workload {
	w := &Workload{cfg: cfg, c: c, chk: chk, tr: tr, log: log, stop: make(chan struct{}), errKinds: map[string]int{}}
	for i := 0; i < cfg.Producers; i++ {
		w.wg.Add(1)
		go w.produce(i)
	}
	for i := 0; i < cfg.Consumers; i++ {
		w.wg.Add(1)
		go w.consume(i)
	}
	for i := 0; i < cfg.GroupConsumers; i++ {
		w.wg.Add(1)
		go w.groupConsume(i)
	}
	return w
}

// Stop stops producing and consuming; producers flush what they buffered
// (bounded) so that late acknowledgements are still recorded.
func (w *Workload) Stop() {
	close(w.stop)
	w.wg.Wait()
}

func (w *Workload) produce(id int) {
	defer w.wg.Done()
	cl, err := kgo.NewClient(w.c.clientOpts(
		kgo.DefaultProduceTopic(w.cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(500),
		kgo.RecordDeliveryTimeout(2*time.Minute),
	)...)
	if err != nil {
		w.log.Error("producer client", "err", err)
		return
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(w.cfg.Seed + int64(id)))
	every := time.Duration(float64(time.Second) * float64(w.cfg.Producers) / float64(w.cfg.Rate))
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Records are produced under a context that outlives the stop, so the
	// final flush can still deliver (and record) what was buffered; a
	// Produce blocked on a full buffer waits at most for the delivery
	// timeout.
	ctx := context.Background()
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := cl.Flush(fctx); err != nil {
				w.log.Warn("producer flush at stop", "producer", id, "err", err)
			}
			fcancel()
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("k%d", rng.Intn(w.cfg.Keys))
		value := fmt.Sprintf("p%d-%d", id, seq)
		// A delete: a null value, its unique id in a header.
		tomb := w.cfg.Compact && w.cfg.Tombstones > 0 && rng.Intn(w.cfg.Tombstones) == 0
		// Random padding: batches are compressed, and a constant pad
		// would shrink to nothing and leave the segments unfilled.
		var pad []kgo.RecordHeader
		if w.cfg.RecordPad > 0 {
			b := make([]byte, w.cfg.RecordPad)
			rng.Read(b)
			pad = []kgo.RecordHeader{{Key: "pad", Value: b}}
		}
		w.produced.Add(1)
		at := time.Now()
		rec := &kgo.Record{Key: []byte(key), Value: []byte(value), Headers: pad, Timestamp: at}
		if tomb {
			rec.Value = nil
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: tombstoneHeader, Value: []byte(value)})
		}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			if err != nil {
				w.failed.Add(1)
				if tomb {
					w.chk.MaybeTombstone(key)
				}
				w.log.Debug("produce not acknowledged", "value", value, "tombstone", tomb, "err", err)
				return
			}
			if tomb {
				w.chk.AckedTombstone(r.Partition, r.Offset, key, value, r.Timestamp)
			} else {
				w.chk.AckedKey(r.Partition, r.Offset, key, value)
			}
			if w.tr != nil {
				w.tr.Acked(r.Partition, r.Offset, at)
			}
		})
	}
}

// tombstoneHeader names the header that carries a tombstone's id: a
// tombstone has no value, and the checker tells writes apart by value.
const tombstoneHeader = "tombstone-id"

// toRecord is r as the checker sees it: a tombstone's value is its id.
func toRecord(r *kgo.Record) history.Record {
	hr := history.Record{Part: r.Partition, Offset: r.Offset, Value: string(r.Value), Key: string(r.Key)}
	if r.Value == nil {
		hr.Tombstone = true
		for _, h := range r.Headers {
			if h.Key == tombstoneHeader {
				hr.Value = string(h.Value)
			}
		}
	}
	return hr
}

// consume runs consumer id: a series of sessions, each a fresh client
// assigned every partition directly, the first from offset 0 and each
// later one from where the previous session stopped (a seek). Within a
// session the checker expects each partition's offsets to follow on.
func (w *Workload) consume(id int) {
	defer w.wg.Done()
	next := map[int32]int64{}
	for p := 0; p < w.cfg.Partitions; p++ {
		next[int32(p)] = 0
	}
	rng := rand.New(rand.NewSource(w.cfg.Seed + 1000 + int64(id)))
	for n := 0; ; n++ {
		sess := fmt.Sprintf("c%d-s%d", id, n)
		length := w.cfg.SessionLength/2 + time.Duration(rng.Int63n(int64(w.cfg.SessionLength)))
		if !w.session(sess, next, length) {
			return
		}
	}
}

// session reads from the positions in next for about length, updating
// next; it returns false when the workload stops.
func (w *Workload) session(sess string, next map[int32]int64, length time.Duration) bool {
	w.sessions.Add(1)
	offsets := map[int32]kgo.Offset{}
	for p, o := range next {
		offsets[p] = kgo.NewOffset().At(o)
		w.chk.StartSession(sess, p, o)
	}
	cl, err := kgo.NewClient(w.c.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		w.log.Error("consumer client", "err", err)
		return false
	}
	defer cl.Close()
	return w.poll(cl, length, next, func(int32) string { return sess }, func(recs []history.Record) {
		next[recs[0].Part] = recs[len(recs)-1].Offset + 1
	}, func() {})
}

// poll polls cl for length, or until the workload stops (then false),
// handing every partition's records to the checker in the session sessOf
// names for that partition; from has the partitions' starting offsets if
// known, seen gets each non-empty partition's records and afterPoll runs
// after each poll.
func (w *Workload) poll(cl *kgo.Client, length time.Duration, from map[int32]int64, sessOf func(int32) string, seen func([]history.Record), afterPoll func()) bool {
	end := time.Now().Add(length)
	type sessPart struct {
		sess string
		part int32
	}
	pos := map[sessPart]int64{} // the offset after the last record each session read
	for p, o := range from {
		pos[sessPart{sessOf(p), p}] = o
	}
	for time.Now().Before(end) {
		select {
		case <-w.stop:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				w.fetchError(sessOf(p), p, err)
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			recs := make([]history.Record, len(fp.Records))
			for i, r := range fp.Records {
				recs[i] = toRecord(r)
			}
			sp := sessPart{sessOf(fp.Partition), fp.Partition}
			if next, ok := pos[sp]; ok && w.tr != nil && recs[0].Offset > next {
				w.skipped(sp.sess, fp.Partition, next, recs[0].Offset)
			}
			pos[sp] = recs[len(recs)-1].Offset + 1
			w.chk.Polled(sp.sess, recs)
			seen(recs)
		})
		afterPoll()
	}
	return true
}

// skipped handles a session whose next record on part is at to, past
// from: with trimming on, the client found from below the log start and
// reset to it (auto.offset.reset=earliest). The brokers' log start is
// asked first, so the checker knows how far it moved; the skip is a
// violation past that. The session goes on from to.
func (w *Workload) skipped(sess string, part int32, from, to int64) {
	w.tr.AwaitStart(context.Background(), part, to)
	w.chk.Skipped(sess, part, from, to)
	w.chk.StartSession(sess, part, to)
	w.skips.Add(1)
}

// groupConsume runs group member id of the group "chaos": a series of
// sessions, each a fresh client that joins the group, reads what it is
// assigned from the group's committed offsets and commits as it goes
// (auto-commit every second, and on revocation). Every assignment starts a
// checker session per partition, which ends when the partition is revoked
// or lost: within it offsets must follow on.
func (w *Workload) groupConsume(id int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewSource(w.cfg.Seed + 2000 + int64(id)))
	for n := 0; ; n++ {
		length := w.cfg.SessionLength/2 + time.Duration(rng.Int63n(int64(w.cfg.SessionLength)))
		if !w.groupSession(fmt.Sprintf("g%d-s%d", id, n), length) {
			return
		}
	}
}

func (w *Workload) groupSession(name string, length time.Duration) bool {
	w.sessions.Add(1)
	// Each assignment of a partition is a checker session of its own; with
	// the cooperative balancer a partition kept across a rebalance stays in
	// its session.
	var mu sync.Mutex
	gen := map[int32]int{}
	sess := func(p int32) string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s-a%d-p%d", name, gen[p], p)
	}
	end := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		for _, p := range m[w.cfg.Topic] {
			w.chk.EndSession(sess(p), p)
		}
	}
	cl, err := kgo.NewClient(w.c.clientOpts(
		kgo.ConsumerGroup("chaos"),
		kgo.ConsumeTopics(w.cfg.Topic),
		kgo.AutoCommitInterval(time.Second),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(15*time.Second),
		kgo.RebalanceTimeout(30*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.assigns.Add(1)
			for _, p := range m[w.cfg.Topic] {
				mu.Lock()
				gen[p]++
				mu.Unlock()
				w.chk.StartSessionAnywhere(sess(p), p)
			}
		}),
		kgo.OnPartitionsRevoked(end),
		kgo.OnPartitionsLost(end),
	)...)
	if err != nil {
		w.log.Error("group consumer client", "err", err)
		return false
	}
	defer func() {
		// Close commits what was polled and leaves the group; bounded by
		// the client's own timeouts.
		cl.Close()
	}()
	return w.poll(cl, length, nil, sess, func([]history.Record) {}, cl.AllowRebalance)
}

// FinalRead waits until every partition has a leader whose high watermark
// covers every acknowledged record, then reads each partition from offset
// 0 to its high watermark with a fresh client and hands it to the checker.
// It returns how many offsets below the high watermarks the reads lacked
// from where they started (a compacted log's gaps).
func FinalRead(ctx context.Context, cfg Config, c *Cluster, chk *history.Checker, tr *Trimmer, log *slog.Logger) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.FinalTimeout)
	defer cancel()
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return 0, err
	}
	hw := map[int32]int64{}
	for len(hw) < cfg.Partitions {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = cfg.Topic
		for p := 0; p < cfg.Partitions; p++ {
			if _, ok := hw[int32(p)]; ok {
				continue
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if kerr.ErrorForCode(p.ErrorCode) != nil {
						log.Debug("final read: list offsets", "partition", p.Partition, "err", kerr.ErrorForCode(p.ErrorCode))
						continue
					}
					if want := chk.AckedEnd(p.Partition); p.Offset < want {
						log.Debug("final read: high watermark below acknowledged", "partition", p.Partition, "hw", p.Offset, "acked_end", want)
						continue
					}
					hw[p.Partition] = p.Offset
				}
			}
		}
		if len(hw) < cfg.Partitions {
			select {
			case <-ctx.Done():
				cl.Close()
				return 0, fmt.Errorf("final read: high watermarks of %d of %d partitions within %v (last error: %v)", len(hw), cfg.Partitions, cfg.FinalTimeout, err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	cl.Close()
	offsets := map[int32]kgo.Offset{}
	read := map[int32][]history.Record{}
	var starts map[int32]int64
	if tr != nil {
		starts = tr.Refresh(ctx)
	}
	for p, h := range hw {
		switch s, ok := starts[p]; {
		case ok && s >= h:
			chk.FinalFrom(p, s, nil, h)
		case h > 0:
			offsets[p] = kgo.NewOffset().AtStart()
		default:
			chk.Final(p, nil, 0)
		}
	}
	log.Info("final read", "high_watermarks", hw)
	if len(offsets) == 0 {
		return 0, nil
	}
	cl, err = kgo.NewClient(c.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}))...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var gaps int64
	for len(offsets) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("final read: partitions %v not read to their high watermarks within %v", keys(offsets), cfg.FinalTimeout)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if _, ok := offsets[fp.Partition]; !ok {
				return
			}
			for _, r := range fp.Records {
				rs := read[fp.Partition]
				if tr != nil && len(rs) > 0 && r.Offset > rs[len(rs)-1].Offset+1 {
					// Retention moved the log start past the read, and
					// the client reset to it: the read starts again there.
					rs = nil
					read[fp.Partition] = nil
				}
				if r.Offset < hw[fp.Partition] {
					read[fp.Partition] = append(rs, toRecord(r))
				}
			}
			if n := len(read[fp.Partition]); n > 0 && read[fp.Partition][n-1].Offset >= hw[fp.Partition]-1 {
				rs := read[fp.Partition]
				from := int64(0)
				if tr != nil {
					from = rs[0].Offset
				}
				gaps += hw[fp.Partition] - from - int64(len(rs))
				if tr == nil {
					chk.Final(fp.Partition, rs, hw[fp.Partition])
				} else {
					// The checker allows the read's start only as far as
					// the brokers report the log start (asked after it).
					tr.AwaitStart(ctx, fp.Partition, rs[0].Offset)
					chk.FinalFrom(fp.Partition, rs[0].Offset, rs, hw[fp.Partition])
				}
				delete(offsets, fp.Partition)
			}
		})
	}
	return gaps, nil
}

func keys[V any](m map[int32]V) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}
