package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
)

// remotePoll is how often a long-polling group fetch looks again at
// assigned partitions led by other brokers (local ones wake it at once).
const remotePoll = 250 * time.Millisecond

// heartbeatEvery is how often a long-polling group fetch renews the
// member's session and checks for a rebalance.
const heartbeatEvery = time.Second

type groupFetchRequest struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
	MaxBytes   int32  `json:"max_bytes,omitempty"`
	MaxWaitMs  int64  `json:"max_wait_ms,omitempty"`
}

// Backoff of a group fetch's reads of a partition that failed (its
// leader refused or could not be reached), doubling from the first to
// the last while the fetch long-polls; a refusal's own Retry-After
// counts when it is longer.
const (
	readBackoff    = 50 * time.Millisecond
	maxReadBackoff = time.Second
)

type partitionState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Position  int64  `json:"position"`
	// HighWatermark is the partition's as last read (-1 before the
	// member's first read of it).
	HighWatermark int64  `json:"high_watermark"`
	RetryOffset   *int64 `json:"retry_offset,omitempty"`
	RetryAtMs     int64  `json:"retry_at_ms,omitempty"`
	// Error is why the partition could not be read, when the fetch
	// returns messages of other partitions anyway.
	Error *api.Error `json:"error,omitempty"`
}

type groupFetchResponse struct {
	Messages   []Message        `json:"messages"`
	Partitions []partitionState `json:"partitions"`
	// reads are the reads of replicas this broker leads, counted once
	// the answer is written (writeMetered).
	reads []meteredRead
}

// readFailure is a partition a group fetch could not read: the error and
// when to try again.
type readFailure struct {
	err   error
	tries int
	next  time.Time
}

// failed notes a failed read of tp at now and returns its failure.
func failed(fails map[groups.TopicPartition]*readFailure, tp groups.TopicPartition, err error, now time.Time) *readFailure {
	f := fails[tp]
	if f == nil {
		f = &readFailure{}
		fails[tp] = f
	}
	f.err = err
	wait := min(readBackoff<<min(f.tries, 10), maxReadBackoff)
	f.tries++
	f.next = now.Add(max(wait, retryAfter(err)))
	return f
}

// groupFetch serves POST /v1/groups/{group}/messages:fetch: messages of
// the member's partitions from their positions, long-polling up to
// max_wait_ms while there are none. Positions start at the committed
// offsets (or earliest/latest as the member joined with) and advance
// with every fetch; a nacked partition is held until its retry time.
//
// A partition that cannot be read (its leader refuses or cannot be
// reached) is read again after a backoff while the fetch waits; a fetch
// that returns no messages while a partition it could not read is still
// failing answers that failure (503 not_leader, 429 with Retry-After, …)
// rather than an empty 200, so the client knows it is not "nothing yet".
func (s *Server) groupFetch(c echo.Context) error {
	var req groupFetchRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	if req.Generation == nil {
		return catalog.InvalidRequest.New("generation is required (from the join's answer)")
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = defaultReadBytes
	}
	if req.MaxBytes < 1 || req.MaxBytes > maxReadBytes || req.MaxWaitMs < 0 {
		return catalog.InvalidFetchSize.Newf("max_bytes must be from 1 to %d and max_wait_ms ≥ 0", maxReadBytes)
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	// Admitted where the request entered the cell; the coordinator, when
	// it is another broker, checks only its throughput, and the
	// partitions' leaders only theirs for the coordinator's reads.
	ctx := c.Request().Context()
	if err := s.admit(ctx, Admission{Principal: cl.p, Op: OpRead, Forwarded: cl.forwarded}); err != nil {
		return err
	}
	wait := min(time.Duration(req.MaxWaitMs)*time.Millisecond, s.cfg.MaxWait)
	return s.asMember(c, cl, group, raw, wait, req.MemberID, *req.Generation, func(coord *groups.Coordinator, sess *memberSession) error {
		deadline := time.Now().Add(wait)
		lastBeat := time.Now()
		wake := make(chan struct{}, 1)
		fails := map[groups.TopicPartition]*readFailure{}
		for {
			out, err := s.fetchRound(c, coord, cl, group, sess, req.MaxBytes, fails)
			if err != nil {
				return err
			}
			if len(out.Messages) > 0 {
				return s.writeMetered(c, out, out.reads)
			}
			now := time.Now()
			until := earliest(deadline, now.Add(remotePoll), lastBeat.Add(heartbeatEvery))
			// failure is the failing partition to try first, or one
			// whose error waiting cannot mend.
			var failure *readFailure
			for _, f := range fails {
				if !catalogued(f.err).Entry.Retriable {
					return f.err
				}
				if failure == nil || f.next.Before(failure.next) {
					failure = f
				}
			}
			switch {
			case failure != nil && (!now.Before(deadline) || !failure.next.Before(deadline)):
				// A partition cannot be read, and will not be before
				// the fetch must answer: say so.
				return failure.err
			case failure != nil:
				until = earliest(until, failure.next)
			case !now.Before(deadline):
				return c.JSON(http.StatusOK, out)
			}
			for _, st := range out.Partitions {
				if st.RetryAtMs > 0 {
					until = earliest(until, time.UnixMilli(st.RetryAtMs))
				}
			}
			// Local partitions wake the poll when they grow, except those
			// held for a nack's retry (their position is behind their
			// high watermark, which would wake it at once, again and
			// again, until the retry time) and those failing.
			var cancels []func()
			for _, p := range sess.parts {
				if r, ok := sess.retry[p.TopicPartition]; ok && s.cfg.Now().Before(r.next()) || fails[p.TopicPartition] != nil {
					continue
				}
				if _, ok := cl.v.TopicByID(p.TopicID); !ok {
					continue
				}
				if part, ok := s.cfg.Partitions.Get(p.TopicID, p.Partition); ok {
					if node, ok := part.Leader(); ok && node == s.cfg.NodeID {
						cancels = append(cancels, part.Watch(sess.pos[p.TopicPartition], wake))
					}
				}
			}
			timer := time.NewTimer(time.Until(until))
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
			for _, cancel := range cancels {
				cancel()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Since(lastBeat) >= heartbeatEvery {
				lastBeat = time.Now()
				if err := coord.Heartbeat(ctx, cl.p.TenantID, group, req.MemberID, "", *req.Generation); err != nil {
					if catalog.Has(err, catalog.RebalanceInProgress) {
						return catalog.RebalanceInProgress.New("the consumer group is rebalancing; join again with your member_id (POST /v1/groups/{group}/members)")
					}
					return err
				}
			}
		}
	})
}

// fetchRound reads once from each of the member's partitions, from the
// one after the last round's first, within maxBytes in all (the first
// partition with data may exceed it by one batch). Partitions held for a
// retry are skipped, and so are those in fails until their next try;
// reads that fail go into fails, reads that succeed leave it. sess.mu is
// held.
func (s *Server) fetchRound(c echo.Context, coord *groups.Coordinator, cl *caller, group string, sess *memberSession, maxBytes int32, fails map[groups.TopicPartition]*readFailure) (*groupFetchResponse, error) {
	out := &groupFetchResponse{Messages: []Message{}, Partitions: []partitionState{}}
	if len(sess.parts) == 0 {
		return out, nil
	}
	if err := s.loadPositions(c, coord, cl, group, sess); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	budget := int64(maxBytes)
	var local int64 // bytes read from replicas this broker leads
	n := len(sess.parts)
	start := sess.next % n
	sess.next++
	for i := range n {
		ap := sess.parts[(start+i)%n]
		tp := ap.TopicPartition
		st := partitionState{Topic: ap.topic, Partition: ap.Partition, Position: sess.pos[tp], HighWatermark: -1}
		if hw, ok := sess.hw[tp]; ok {
			st.HighWatermark = hw
		}
		r, retrying := sess.retry[tp]
		if retrying {
			st.RetryOffset = &r.Offset
			if now.Before(r.next()) {
				st.RetryAtMs = r.NextMs
				out.Partitions = append(out.Partitions, st)
				continue
			}
		}
		t, ok := cl.v.TopicByID(tp.TopicID)
		if f := fails[tp]; !ok || budget <= 0 || (f != nil && now.Before(f.next)) {
			if f != nil {
				e := errorBody(catalogued(f.err))
				st.Error = &e
			}
			out.Partitions = append(out.Partitions, st)
			continue
		}
		rr, isLocal, err := s.readPart(c, t, cl, tp.Partition, sess.pos[tp], int32(min(budget, maxReadBytes)))
		if catalog.Has(err, catalog.OffsetOutOfRange) {
			// Retention passed the position: start again per the
			// member's reset policy.
			delete(sess.pos, tp)
			if err = s.resetPosition(c, cl, t, sess, tp); err == nil {
				st.Position = sess.pos[tp]
			}
		}
		if err != nil {
			f := failed(fails, tp, err, now)
			e := errorBody(catalogued(f.err))
			st.Error = &e
			out.Partitions = append(out.Partitions, st)
			continue
		}
		delete(fails, tp)
		st.HighWatermark = rr.HighWatermark
		sess.hw[tp] = rr.HighWatermark
		if isLocal {
			out.reads = append(out.reads, readOf(t.ID, rr))
		}
		for _, m := range rr.Messages {
			m.Topic = ap.topic
			if retrying && m.Offset == r.Offset {
				m.DeliveryAttempt = r.Attempts + 1
			}
			size := int64(len(m.Key) + len(m.Value))
			budget -= size
			if isLocal {
				local += size
			}
			out.Messages = append(out.Messages, m)
		}
		if rr.NextOffset > sess.pos[tp] {
			sess.pos[tp] = rr.NextOffset
		}
		st.Position = sess.pos[tp]
		out.Partitions = append(out.Partitions, st)
	}
	// Counted, never refused, here: the positions have moved past these
	// messages, so refusing them now would skip them. The fetch was
	// admitted before it read. Bytes read on another broker were counted
	// by that broker, which read them.
	s.record(Admission{Principal: cl.p, Op: OpRead, Messages: len(out.Messages), Bytes: local})
	return out, nil
}

// loadPositions sets the positions the member's session lacks from the
// group's committed offsets (and their retry state), or by its reset
// policy where nothing is committed.
func (s *Server) loadPositions(c echo.Context, coord *groups.Coordinator, cl *caller, group string, sess *memberSession) error {
	var missing []groups.TopicPartition
	for _, p := range sess.parts {
		if _, ok := sess.pos[p.TopicPartition]; !ok {
			missing = append(missing, p.TopicPartition)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	committed, err := coord.FetchOffsets(c.Request().Context(), cl.p.TenantID, group, missing)
	if err != nil {
		return err
	}
	for _, tp := range missing {
		if co, ok := committed[tp]; ok && co.Offset >= 0 {
			sess.pos[tp] = co.Offset
			if r, ok := parseRetry(co.Metadata); ok && r.Offset == co.Offset {
				sess.retry[tp] = r
			}
			continue
		}
		t, ok := cl.v.TopicByID(tp.TopicID)
		if !ok {
			continue
		}
		if err := s.resetPosition(c, cl, t, sess, tp); err != nil {
			return err
		}
	}
	return nil
}

// resetPosition starts a partition at its log start or high watermark,
// as the member's auto_offset_reset says.
func (s *Server) resetPosition(c echo.Context, cl *caller, t *wire.Topic, sess *memberSession, tp groups.TopicPartition) error {
	o, err := s.offsetsOf(c, t, cl, tp.Partition, nil)
	if err != nil {
		return err
	}
	sess.pos[tp] = o.LogStartOffset
	if sess.opts.AutoOffsetReset == "latest" {
		sess.pos[tp] = o.HighWatermark
	}
	return nil
}

func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}
