package httpapi

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/records"
)

// Redrive limits.
const (
	defaultRedrive = 100
	maxRedrive     = 1000
)

// RedriveGroup is the consumer group whose committed offsets on a group's
// dead-letter topic record how far redrive got. It never has members.
func RedriveGroup(group string) string { return DeadLetterTopic(group) + ".redrive" }

type redriveRequest struct {
	MaxMessages int `json:"max_messages,omitempty"`
}

type redriveResponse struct {
	Redriven  int   `json:"redriven"`
	Remaining int64 `json:"remaining"`
}

// redrive serves POST /v1/groups/{group}/dead-letters:redrive: it moves
// up to max_messages dead letters back to their original topics (and
// partitions, when they still exist), with their key, value, original
// headers and message id. Progress is committed as the offsets of
// RedriveGroup(group), so a dead letter is redriven once, in order, even
// across failures (at least once if a failure hits between the publish
// and the commit).
func (s *Server) redrive(c echo.Context) error {
	var req redriveRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	if req.MaxMessages == 0 {
		req.MaxMessages = defaultRedrive
	}
	if req.MaxMessages < 1 || req.MaxMessages > maxRedrive {
		return catalog.InvalidRequest.Newf("max_messages must be from 1 to %d", maxRedrive)
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	name := DeadLetterTopic(group)
	dlq, ok := cl.v.Topic(cl.p.TenantID, name)
	if !ok {
		return catalog.TopicNotFound.Newf("the group has no dead-letter topic %q", name)
	}
	if !cl.topicAllowed(name, authz.OpRead) {
		return catalog.TopicAccessDenied.Newf("the caller may not read the dead-letter topic %q", name)
	}
	progress := RedriveGroup(group)
	return s.onCoordinator(c, cl, progress, raw, 0, func(coord *groups.Coordinator) error {
		ctx := c.Request().Context()
		var tps []groups.TopicPartition
		for p := range len(dlq.Partitions) {
			tps = append(tps, groups.TopicPartition{TopicID: dlq.ID, Partition: int32(p)})
		}
		committed, err := coord.FetchOffsets(ctx, cl.p.TenantID, progress, tps)
		if err != nil {
			return err
		}
		out := redriveResponse{}
		for _, tp := range tps {
			pos := int64(0)
			if co, ok := committed[tp]; ok && co.Offset >= 0 {
				pos = co.Offset
			}
			for out.Redriven < req.MaxMessages {
				rr, _, err := s.readPart(c, dlq, cl, tp.Partition, max(pos, 0), defaultReadBytes)
				if catalog.Has(err, catalog.OffsetOutOfRange) {
					o, oerr := s.offsetsOf(c, dlq, cl, tp.Partition, nil)
					if oerr != nil {
						return oerr
					}
					pos = o.LogStartOffset
					continue
				}
				if err != nil {
					return err
				}
				if len(rr.Messages) == 0 {
					out.Remaining += max(rr.HighWatermark-pos, 0)
					break
				}
				n := 0
				for _, m := range rr.Messages {
					if out.Redriven >= req.MaxMessages {
						break
					}
					if err := s.redriveOne(c, cl, m); err != nil {
						if n > 0 {
							_ = coord.CommitOffsets(ctx, cl.p.TenantID, progress, "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: pos, LeaderEpoch: -1}})
						}
						return err
					}
					pos = m.Offset + 1
					n++
					out.Redriven++
				}
				if err := coord.CommitOffsets(ctx, cl.p.TenantID, progress, "", "", -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: pos, LeaderEpoch: -1}}); err != nil {
					return err
				}
				if out.Redriven >= req.MaxMessages {
					out.Remaining += max(rr.HighWatermark-pos, 0)
				}
			}
		}
		return c.JSON(http.StatusOK, out)
	})
}

// redriveOne publishes a dead letter back to where it came from.
func (s *Server) redriveOne(c echo.Context, cl *caller, m Message) error {
	var topic string
	part := int64(-1)
	pm := publishMessage{Key: m.Key, Value: m.Value, MessageID: m.MessageID}
	for _, h := range m.Headers {
		switch h.Key {
		case DeadLetterTopicHeader:
			topic = string(h.Value)
		case DeadLetterPartitionHeader:
			if n, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				part = n
			}
		case DeadLetterOffsetHeader, DeadLetterAttemptsHeader, DeadLetterErrorHeader:
		default:
			pm.Headers = append(pm.Headers, h)
		}
	}
	if topic == "" {
		return catalog.CorruptMessage.Newf("dead letter at offset %d has no %s header; it cannot be redriven", m.Offset, DeadLetterTopicHeader)
	}
	t, ok := cl.v.Topic(cl.p.TenantID, topic)
	if !ok {
		return catalog.TopicNotFound.Newf("the dead letter at offset %d came from topic %q, which no longer exists", m.Offset, topic)
	}
	if !cl.topicAllowed(topic, authz.OpWrite) {
		return catalog.TopicAccessDenied.Newf("the caller may not write topic %q", topic)
	}
	if part >= 0 && int(part) < len(t.Partitions) {
		p := int32(part)
		pm.Partition = &p
	}
	res, err := s.publishMessages(c, cl, t, &publishRequest{Messages: []publishMessage{pm}}, records.NoProducer)
	if err != nil {
		return err
	}
	if e := res[0].Error; e != nil {
		return remoteError(0, *e)
	}
	return nil
}
