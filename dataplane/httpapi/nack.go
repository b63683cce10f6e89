package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/records"
)

// Headers of a dead letter, besides its original headers and message id.
const (
	DeadLetterTopicHeader     = "sluice-dlq-topic"
	DeadLetterPartitionHeader = "sluice-dlq-partition"
	DeadLetterOffsetHeader    = "sluice-dlq-offset"
	DeadLetterAttemptsHeader  = "sluice-dlq-attempts"
	DeadLetterErrorHeader     = "sluice-dlq-error"
)

// maxNackError bounds the error text a nack may carry.
const maxNackError = 1024

// DeadLetterTopic is the name of a group's dead-letter topic.
func DeadLetterTopic(group string) string { return group + ".dlq" }

type nackRequest struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Offset     *int64 `json:"offset"`
	Error      string `json:"error,omitempty"`
}

type nackResponse struct {
	Action     string      `json:"action"` // retry, dead_letter or redeliver
	Attempts   int         `json:"attempts"`
	RetryAtMs  int64       `json:"retry_at_ms,omitempty"`
	DeadLetter *offsetItem `json:"dead_letter,omitempty"`
}

// nack serves POST /v1/groups/{group}/messages:nack: the member could not
// process a message it fetched. The partition's position rewinds to it
// and nothing of the partition is delivered before an exponential
// backoff ends; after RetryAttempts failed deliveries the message goes
// to the group's dead-letter topic and the group moves past it. The
// retry state is committed with the offset, so it survives a
// coordinator failover.
func (s *Server) nack(c echo.Context) error {
	var req nackRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	switch {
	case req.Generation == nil:
		return catalog.InvalidRequest.New("generation is required (from the join's answer)")
	case req.Offset == nil || *req.Offset < 0:
		return catalog.InvalidRequest.New("offset is required: the offset of the message that failed")
	case len(req.Error) > maxNackError:
		return catalog.InvalidRequest.Newf("error is longer than %d bytes", maxNackError)
	}
	t, err := cl.partitionOf(req.Topic, req.Partition)
	if err != nil {
		return err
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	return s.asMember(c, cl, group, raw, 0, req.MemberID, *req.Generation, func(coord *groups.Coordinator, sess *memberSession) error {
		ctx := c.Request().Context()
		tp := groups.TopicPartition{TopicID: t.ID, Partition: req.Partition}
		assigned := false
		for _, p := range sess.parts {
			assigned = assigned || p.TopicPartition == tp
		}
		if !assigned {
			return catalog.InvalidRequest.Newf("partition %d of %q is not assigned to this member", req.Partition, req.Topic)
		}
		if err := s.loadPositions(c, coord, cl, group, sess); err != nil {
			return err
		}
		off := *req.Offset
		if off >= sess.pos[tp] {
			// Not delivered since the partition's position was last set (a
			// coordinator that took the group over starts at the committed
			// offset): the message comes again anyway.
			return c.JSON(http.StatusOK, nackResponse{Action: "redeliver", Attempts: sess.retry[tp].Attempts})
		}
		r := sess.retry[tp]
		if r.Offset != off {
			r = retryState{Offset: off}
		}
		r.Attempts++
		r.Error = req.Error
		now := s.cfg.Now()
		if r.Attempts < s.cfg.RetryAttempts {
			backoff := s.cfg.RetryBackoff << (r.Attempts - 1)
			if backoff > s.cfg.RetryMaxBackoff || backoff <= 0 {
				backoff = s.cfg.RetryMaxBackoff
			}
			r.NextMs = now.Add(backoff).UnixMilli()
			commit := groups.OffsetCommit{TopicPartition: tp, Offset: off, LeaderEpoch: -1, Metadata: r.metadata()}
			if err := coord.CommitOffsets(ctx, cl.p.TenantID, group, req.MemberID, "", *req.Generation, []groups.OffsetCommit{commit}); err != nil {
				return err
			}
			sess.retry[tp] = r
			sess.pos[tp] = off
			return c.JSON(http.StatusOK, nackResponse{Action: "retry", Attempts: r.Attempts, RetryAtMs: r.NextMs})
		}
		dlq, err := s.ensureTopic(c, cl, DeadLetterTopic(group))
		if err != nil {
			return err
		}
		var dl *offsetItem
		if r.DLQFrom == nil {
			// Commit where the dead-letter topic ends before publishing to
			// it: a nack repeated after the publish but before the commit
			// below (the coordinator moved) finds the dead letter there
			// rather than publishing it twice.
			o, err := s.offsetsOf(c, dlq, cl, 0, nil)
			if err != nil {
				return err
			}
			r.DLQFrom, r.NextMs = &o.HighWatermark, now.UnixMilli()
			commit := groups.OffsetCommit{TopicPartition: tp, Offset: off, LeaderEpoch: -1, Metadata: r.metadata()}
			if err := coord.CommitOffsets(ctx, cl.p.TenantID, group, req.MemberID, "", *req.Generation, []groups.OffsetCommit{commit}); err != nil {
				return err
			}
			sess.retry[tp] = r
			sess.pos[tp] = off
		} else if dl, err = s.findDeadLetter(c, cl, dlq, *r.DLQFrom, t.Name, req.Partition, off); err != nil {
			return err
		}
		if dl == nil {
			if dl, err = s.deadLetter(c, cl, dlq, t, req.Partition, off, r); err != nil {
				return err
			}
		}
		if f := s.afterDeadLetter.Load(); f != nil {
			(*f)()
		}
		commit := groups.OffsetCommit{TopicPartition: tp, Offset: off + 1, LeaderEpoch: -1}
		if err := coord.CommitOffsets(ctx, cl.p.TenantID, group, req.MemberID, "", *req.Generation, []groups.OffsetCommit{commit}); err != nil {
			return err
		}
		delete(sess.retry, tp)
		sess.pos[tp] = off + 1
		return c.JSON(http.StatusOK, nackResponse{Action: "dead_letter", Attempts: r.Attempts, DeadLetter: dl})
	})
}

// deadLetter copies the message at off to the group's dead-letter topic
// with its key, value, headers and message id, plus where it came from,
// how often it failed and the last error.
func (s *Server) deadLetter(c echo.Context, cl *caller, dlq, t *wire.Topic, p int32, off int64, r retryState) (*offsetItem, error) {
	rr, _, err := s.readPart(c, t, cl, p, off, 1)
	if err != nil {
		return nil, err
	}
	var m *Message
	for i := range rr.Messages {
		if rr.Messages[i].Offset == off {
			m = &rr.Messages[i]
			break
		}
	}
	if m == nil {
		return nil, catalog.OffsetOutOfRange.Newf("offset %d of partition %d is no longer retained; it cannot be dead-lettered", off, p)
	}
	hs := append([]jsonHeader{}, m.Headers...)
	hs = append(hs,
		jsonHeader{Key: DeadLetterTopicHeader, Value: []byte(t.Name)},
		jsonHeader{Key: DeadLetterPartitionHeader, Value: []byte(strconv.Itoa(int(p)))},
		jsonHeader{Key: DeadLetterOffsetHeader, Value: []byte(strconv.FormatInt(off, 10))},
		jsonHeader{Key: DeadLetterAttemptsHeader, Value: []byte(strconv.Itoa(r.Attempts))},
		jsonHeader{Key: DeadLetterErrorHeader, Value: []byte(r.Error)},
	)
	pm := publishMessage{Key: m.Key, Value: m.Value, Headers: hs, MessageID: m.MessageID}
	res, err := s.publishMessages(c, cl, dlq, &publishRequest{Messages: []publishMessage{pm}}, records.NoProducer)
	if err != nil {
		return nil, err
	}
	if e := res[0].Error; e != nil {
		return nil, remoteError(0, *e)
	}
	return &offsetItem{Topic: dlq.Name, Partition: res[0].Partition, Offset: res[0].Offset}, nil
}

// findDeadLetter looks in the dead-letter topic from offset from for
// the dead letter of offset off of partition p of topic; nil if it is
// not there.
func (s *Server) findDeadLetter(c echo.Context, cl *caller, dlq *wire.Topic, from int64, topic string, p int32, off int64) (*offsetItem, error) {
	o, err := s.offsetsOf(c, dlq, cl, 0, nil)
	if err != nil {
		return nil, err
	}
	pStr, offStr := strconv.Itoa(int(p)), strconv.FormatInt(off, 10)
	for at := max(from, o.LogStartOffset); at < o.HighWatermark; {
		rr, _, err := s.readPart(c, dlq, cl, 0, at, defaultReadBytes)
		if err != nil {
			return nil, err
		}
		for _, m := range rr.Messages {
			if header(m.Headers, DeadLetterTopicHeader) == topic && header(m.Headers, DeadLetterPartitionHeader) == pStr &&
				header(m.Headers, DeadLetterOffsetHeader) == offStr {
				return &offsetItem{Topic: dlq.Name, Partition: 0, Offset: m.Offset}, nil
			}
		}
		if rr.NextOffset <= at {
			break
		}
		at = rr.NextOffset
	}
	return nil, nil
}

// header is the value of a message's last header named key.
func header(hs []jsonHeader, key string) string {
	v := ""
	for _, h := range hs {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// topicWait bounds waiting for a topic created here to be served.
const topicWait = 30 * time.Second

// ensureTopic returns the caller's topic name, creating it (one
// partition) through the control plane with the caller's own key when it
// does not exist, Config.ControlPlane is set and the caller's ACLs allow
// create on it (or on the cluster), and waiting until this broker's state
// has it.
func (s *Server) ensureTopic(c echo.Context, cl *caller, name string) (*wire.Topic, error) {
	if !cl.topicAllowed(name, authz.OpWrite) {
		return nil, catalog.TopicAccessDenied.Newf("the caller may not write the dead-letter topic %q", name)
	}
	if t, ok := s.cfg.State.View().Topic(cl.p.TenantID, name); ok {
		return t, nil
	}
	if s.cfg.ControlPlane == nil {
		return nil, catalog.TopicNotFound.Newf("the dead-letter topic %q does not exist; create it first", name)
	}
	if !cl.topicAllowed(name, authz.OpCreate) {
		return nil, catalog.TopicAccessDenied.Newf("the dead-letter topic %q does not exist and the caller may not create it; create it first, or allow the key create on it", name)
	}
	id, secret, _ := c.Request().BasicAuth()
	ctx, cancel := context.WithTimeout(c.Request().Context(), topicWait)
	defer cancel()
	_, err := s.cfg.ControlPlane.With(client.WithAPIKey(id, secret)).CreateTopic(ctx, api.CreateTopicRequest{Name: name, Partitions: 1})
	if err != nil && !client.IsCode(err, string(catalog.TopicAlreadyExists.Code)) && !client.IsCode(err, string(catalog.AlreadyExists.Code)) {
		var ce *client.Error
		if errors.As(err, &ce) {
			if e := catalog.Lookup(catalog.Code(ce.Code)); e != nil {
				return nil, e.Newf("create the dead-letter topic %q: %s", name, ce.Message)
			}
		}
		return nil, catalog.Unavailable.Wrap(err, fmt.Sprintf("the dead-letter topic %q could not be created; retry", name))
	}
	// Wait until this broker has the topic and its replica knows a
	// leader: that leader then has the topic in its state too, so a
	// publish forwarded to it is served.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := s.cfg.State.Changed()
		if t, ok := s.cfg.State.View().Topic(cl.p.TenantID, name); ok {
			if part, ok := s.cfg.Partitions.Get(t.ID, 0); ok {
				if _, ok := part.Leader(); ok {
					return t, nil
				}
			}
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return nil, catalog.Unavailable.Newf("the dead-letter topic %q was created but is not served yet; retry", name)
		}
	}
}
