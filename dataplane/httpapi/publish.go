package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
)

// MessageIDHeader is the record header that carries a message's id; the
// API fills it in when a publish gives none, and Kafka clients see it as
// an ordinary header.
const MessageIDHeader = "sluice-message-id"

// maxMessageIDLen bounds a caller's message id.
const maxMessageIDLen = 256

// maxPublishWait bounds how long a publish waits for its commit.
const maxPublishWait = 30 * time.Second

type publishRequest struct {
	Messages      []publishMessage `json:"messages"`
	ProducerID    *int64           `json:"producer_id,omitempty"`
	ProducerEpoch *int16           `json:"producer_epoch,omitempty"`
	BaseSequence  *int32           `json:"base_sequence,omitempty"`
}

type publishMessage struct {
	Key       []byte       `json:"key"`
	Value     []byte       `json:"value"`
	Headers   []jsonHeader `json:"headers,omitempty"`
	Partition *int32       `json:"partition,omitempty"`
	MessageID string       `json:"message_id,omitempty"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type publishResponse struct {
	Messages []publishResult `json:"messages"`
}

type publishResult struct {
	Partition int32      `json:"partition"`
	Offset    int64      `json:"offset"`
	MessageID string     `json:"message_id"`
	Error     *api.Error `json:"error,omitempty"`
	// retryAfter is the wait the error names (a leader's refusal), for
	// the Retry-After of a publish that failed entirely.
	retryAfter time.Duration
}

// partBatch is the messages of one publish for one partition, in request
// order.
type partBatch struct {
	part  int32
	idx   []int // indexes into the request's messages
	batch []byte
}

// publish appends a request's messages: each to the partition it names,
// or its key's (Kafka's murmur2 partitioner), or one partition picked
// round robin for the request's null-key messages; one record batch per
// partition, through the local leader or forwarded to the leader's
// broker. Validation fails the whole request before anything is written.
func (s *Server) publish(c echo.Context) error {
	cl := callerOf(c)
	name := c.Param("topic")
	var req publishRequest
	if err := s.bind(c, &req); err != nil {
		return err
	}
	t, ok := cl.v.Topic(cl.p.TenantID, name)
	if !ok {
		return catalog.TopicNotFound.Newf("no such topic: %q", name)
	}
	if !cl.topicAllowed(name, authz.OpWrite) {
		return catalog.TopicAccessDenied.New("")
	}
	prod, err := s.producerOf(&req)
	if err != nil {
		return err
	}
	res, err := s.publishMessages(c, cl, t, &req, prod)
	if err != nil {
		return err
	}
	var failed, ok200 int
	var first *api.Error
	var wait time.Duration
	for i := range res {
		if res[i].Error != nil {
			failed++
			if first == nil {
				first = res[i].Error
			}
			wait = max(wait, res[i].retryAfter)
		} else {
			ok200++
		}
	}
	switch {
	case failed == 0:
		return c.JSON(http.StatusOK, publishResponse{Messages: res})
	case ok200 == 0:
		// Nothing was written: answer with the (first) failure itself.
		return retryAfterOf(remoteError(0, *first), wait)
	default:
		// Some partitions committed, others did not: say which.
		return c.JSON(http.StatusMultiStatus, publishResponse{Messages: res})
	}
}

// publishMessages plans, admits and appends a publish's messages (the
// caller checked the topic and its ACL), and returns each message's
// result. Validation fails it before anything is written.
func (s *Server) publishMessages(c echo.Context, cl *caller, t *wire.Topic, req *publishRequest, prod records.Producer) ([]publishResult, error) {
	batches, err := s.plan(req, t, prod)
	if err != nil {
		return nil, err
	}
	var size int64
	for _, b := range batches {
		size += int64(len(b.batch))
	}
	if err := s.admit(c.Request().Context(), Admission{Principal: cl.p, Op: OpPublish, Topic: t.Name, Messages: len(req.Messages), Bytes: size, Forwarded: cl.forwarded}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), maxPublishWait)
	defer cancel()
	res := make([]publishResult, len(req.Messages))
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.publishPart(ctx, c, cl.v, t, req, b, res)
		}()
	}
	wg.Wait()
	return res, nil
}

// producerOf checks the idempotence fields: all three or none.
func (s *Server) producerOf(req *publishRequest) (records.Producer, error) {
	if req.ProducerID == nil && req.ProducerEpoch == nil && req.BaseSequence == nil {
		return records.NoProducer, nil
	}
	switch {
	case req.ProducerID == nil || req.ProducerEpoch == nil || req.BaseSequence == nil:
		return records.NoProducer, catalog.InvalidRequest.New("an idempotent publish needs producer_id, producer_epoch and base_sequence together")
	case s.cfg.ProducerIDs == nil:
		return records.NoProducer, catalog.InvalidRequest.New("idempotent publishes are not served by this broker; leave out producer_id")
	case *req.ProducerID < 0 || *req.ProducerEpoch < 0 || *req.BaseSequence < 0:
		return records.NoProducer, catalog.InvalidRequest.New("producer_id, producer_epoch and base_sequence must not be negative")
	}
	return records.Producer{ID: *req.ProducerID, Epoch: *req.ProducerEpoch, BaseSequence: *req.BaseSequence}, nil
}

// plan validates the messages, gives each a partition and a message id,
// and builds one batch per partition.
func (s *Server) plan(req *publishRequest, t *wire.Topic, prod records.Producer) ([]*partBatch, error) {
	n := len(t.Partitions)
	switch {
	case len(req.Messages) == 0:
		return nil, catalog.InvalidRequest.New("messages is empty; send at least one message")
	case n == 0:
		return nil, catalog.Unavailable.New("the topic has no partitions yet; retry")
	}
	if topicspec.Config(t.Config).Compacted() {
		for i := range req.Messages {
			if req.Messages[i].Key == nil {
				return nil, catalog.InvalidRecord.Newf("messages[%d] has no key: the topic is compacted (cleanup.policy includes compact), so every message needs one; nothing was published", i)
			}
		}
	}
	sticky := int32(s.sticky.Add(1) % uint32(n))
	now := s.cfg.Now().UnixMilli()
	byPart := map[int32]*partBatch{}
	var order []*partBatch
	recs := map[int32][]records.Record{}
	for i := range req.Messages {
		m := &req.Messages[i]
		var p int32
		switch {
		case m.Partition != nil:
			p = *m.Partition
			if p < 0 || int(p) >= n {
				return nil, catalog.PartitionNotFound.Newf("messages[%d]: the topic has partitions 0 to %d, not %d", i, n-1, p)
			}
		case m.Key != nil:
			p = records.KeyPartition(m.Key, n)
		default:
			p = sticky
		}
		if len(m.MessageID) > maxMessageIDLen {
			return nil, catalog.InvalidRequest.Newf("messages[%d]: message_id is longer than %d bytes", i, maxMessageIDLen)
		}
		if m.MessageID == "" {
			m.MessageID = newMessageID()
		}
		m.Partition = &p
		hs := make([]records.Header, 0, len(m.Headers)+1)
		for _, h := range m.Headers {
			if h.Key == MessageIDHeader {
				return nil, catalog.InvalidRequest.Newf("messages[%d]: header %q is reserved; set message_id instead", i, MessageIDHeader)
			}
			hs = append(hs, records.Header{Key: h.Key, Value: h.Value})
		}
		hs = append(hs, records.Header{Key: MessageIDHeader, Value: []byte(m.MessageID)})
		b := byPart[p]
		if b == nil {
			b = &partBatch{part: p}
			byPart[p] = b
			order = append(order, b)
		}
		b.idx = append(b.idx, i)
		recs[p] = append(recs[p], records.Record{Timestamp: now, Key: m.Key, Value: m.Value, Headers: hs})
	}
	if prod.ID >= 0 && len(order) > 1 {
		return nil, catalog.InvalidRequest.New("an idempotent publish must go to one partition (sequence numbers are per partition); set partition, or publish per partition")
	}
	limit := maxMessageBytes(t)
	for _, b := range order {
		b.batch = records.Build(recs[b.part], prod)
		if len(b.batch) > limit {
			return nil, catalog.MessageTooLarge.Newf("the messages for partition %d take %d bytes as a record batch; the topic's max.message.bytes is %d: publish fewer or smaller messages", b.part, len(b.batch), limit)
		}
		if _, err := log.CheckClientBatchFraming(b.batch); err != nil { // the partition's Produce validates it whole
			return nil, catalog.Internal.Wrap(err, "")
		}
	}
	return order, nil
}

// publishPart appends one partition's batch on the local leader, or
// forwards its messages to the leader's broker, and fills in their
// results.
func (s *Server) publishPart(ctx context.Context, c echo.Context, v *cellview.View, t *wire.Topic, req *publishRequest, b *partBatch, res []publishResult) {
	setAll := func(off int64, err error) {
		var body *api.Error
		if err != nil {
			ce := catalogued(err)
			if ce.Entry == catalog.Internal {
				s.cfg.Logger.Error("http publish failed", "topic_id", t.ID, "partition", b.part, "err", err)
			}
			e := errorBody(ce)
			body = &e
		}
		for k, i := range b.idx {
			res[i] = publishResult{Partition: b.part, Offset: -1, MessageID: req.Messages[i].MessageID, Error: body, retryAfter: retryAfter(err)}
			if err == nil {
				res[i].Offset = off + int64(k)
			}
		}
	}
	deadline := time.Now().Add(leaderWait)
	part, leader, known := s.leaderOf(ctx, t, b.part)
	for known && leader == s.cfg.NodeID {
		base, err := part.Produce(ctx, b.batch)
		if err != nil && neverAppended(err) && time.Now().Before(deadline) && pause(ctx, 20*time.Millisecond) {
			// Leadership moved before the batch entered the log: look
			// for the new leader and send it there.
			part, leader, known = s.leaderOf(ctx, t, b.part)
			continue
		}
		if err == nil {
			s.metrics.published.WithLabelValues("messages").Add(float64(len(b.idx)))
			s.metrics.published.WithLabelValues("bytes").Add(float64(len(b.batch)))
			// Counted where appended: a forwarded batch is counted by
			// the leader that appends it.
			// Billing meters it from the partition's log
			// (partition/meter.go): nothing to wait for here.
			s.record(Admission{Principal: callerOf(c).p, Op: OpPublish, Topic: t.Name, Messages: len(b.idx), Bytes: int64(len(b.batch))})
		}
		setAll(base, err)
		return
	}
	if !known {
		setAll(0, frontdoor.NoLeader(part, "the partition has no leader right now; retry"))
		return
	}
	sub := publishRequest{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, BaseSequence: req.BaseSequence}
	for _, i := range b.idx {
		sub.Messages = append(sub.Messages, req.Messages[i])
	}
	body, err := json.Marshal(sub)
	if err != nil {
		setAll(0, err)
		return
	}
	a, err := s.forward(c, v, leader, http.MethodPost, "/v1/topics/"+url.PathEscape(t.Name)+"/messages:publish", body, 0)
	if err != nil {
		setAll(0, err)
		return
	}
	if a.status != http.StatusOK && a.status != http.StatusMultiStatus {
		var e api.Error
		if json.Unmarshal(a.body, &e) != nil || e.Code == "" {
			setAll(0, fmt.Errorf("forwarded publish answered %d: %.200q", a.status, a.body))
			return
		}
		setAll(0, retryAfterOf(remoteError(a.status, e), a.retryAfter))
		return
	}
	var pr publishResponse
	if err := json.Unmarshal(a.body, &pr); err != nil || len(pr.Messages) != len(b.idx) {
		setAll(0, fmt.Errorf("forwarded publish answered %d results for %d messages (%v)", len(pr.Messages), len(b.idx), err))
		return
	}
	for k, i := range b.idx {
		res[i] = pr.Messages[k]
	}
}

// neverAppended reports whether a produce failed because the replica did
// not lead when the batch arrived, so that the batch is certainly not in
// the log and may be sent again: a not-leader error without a cause (the
// replica refused before Raft), or caused by Raft's ErrNotLeader or a
// leadership transfer. A leadership lost after the append is not one.
func neverAppended(err error) bool {
	var ln frontdoor.LeaderNoder
	if !errors.As(err, &ln) {
		return false
	}
	if e, ok := ln.(error); ok && errors.Unwrap(e) == nil {
		return true
	}
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// pause waits d, or until ctx ends (then false).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaderWait bounds how long a request waits for a partition without a
// known leader to elect one.
const leaderWait = 5 * time.Second

// leaderOf returns the local replica (nil if none) and the partition's
// leader. While the local replica knows no leader (an election, a
// leadership transfer) it waits up to leaderWait for one. Without a local
// replica the preferred replica is the guess: it forwards on if it knows
// better.
func (s *Server) leaderOf(ctx context.Context, t *wire.Topic, p int32) (Partition, int, bool) {
	part, local := s.cfg.Partitions.Get(t.ID, p)
	if !local {
		node := preferred(t, p)
		return nil, node, node > 0 && node != s.cfg.NodeID
	}
	if node, ok := part.Leader(); ok {
		return part, node, true
	}
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	wake := make(chan struct{}, 1)
	for {
		stop := part.Watch(part.HighWatermark(), wake)
		node, ok := part.Leader()
		if ok {
			stop()
			return part, node, true
		}
		if frontdoor.PartitionNoQuorum(part) {
			// No election can succeed until brokers return: answer
			// now (frontdoor.NoLeader) rather than after leaderWait.
			stop()
			return part, -1, false
		}
		select {
		case <-wake:
		case <-ctx.Done():
		}
		stop()
		if ctx.Err() != nil {
			return part, -1, false
		}
	}
}

// preferred is a partition's preferred leader (its first replica), -1 if
// the state lists none.
func preferred(t *wire.Topic, p int32) int {
	for _, x := range t.Partitions {
		if int32(x.Partition) == p && len(x.Replicas) > 0 {
			return x.Replicas[0]
		}
	}
	return -1
}

// maxMessageBytes is the topic's max.message.bytes (Kafka's default when
// the state does not say): the largest record batch it accepts.
func maxMessageBytes(t *wire.Topic) int {
	if n, ok := topicspec.Config(t.Config).MaxMessageBytes(); ok {
		return n
	}
	return 1 << 20
}

// newMessageID is a random (version 4) UUID.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// admit asks Config.Admit, if set, whether the tenant may go on. It is the
// one place where a tenant's request is admitted; record is the one place
// where what it moved is counted.
func (s *Server) admit(ctx context.Context, a Admission) error {
	if s.cfg.Admit == nil {
		return nil
	}
	if err := s.cfg.Admit(ctx, a); err != nil {
		var ce *catalog.Error
		if !errors.As(err, &ce) {
			return catalog.Internal.Wrap(err, "")
		}
		return err
	}
	return nil
}

// record tells Config.Record, if set, what an admitted request moved.
func (s *Server) record(a Admission) {
	if s.cfg.Record != nil && (a.Bytes > 0 || a.Messages > 0) {
		s.cfg.Record(a)
	}
}

// producerID answers POST /v1/producer-ids: a new producer id at epoch 0
// for idempotent publishes.
func (s *Server) producerID(c echo.Context) error {
	if s.cfg.ProducerIDs == nil {
		return catalog.InvalidRequest.New("idempotent publishes are not served by this broker")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	id, err := s.cfg.ProducerIDs.Next(ctx)
	if err != nil {
		return catalog.Unavailable.Wrap(err, "no producer id could be allocated; retry")
	}
	return c.JSON(http.StatusCreated, map[string]int64{"producer_id": id, "producer_epoch": 0})
}
