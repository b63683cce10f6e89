package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/groups"
)

type offsetItem struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type commitRequest struct {
	MemberID   string       `json:"member_id"`
	Generation *int32       `json:"generation"`
	Offsets    []offsetItem `json:"offsets"`
}

type offsetsAnswer struct {
	Offsets []offsetItem `json:"offsets"`
}

// commit serves POST /v1/groups/{group}/offsets:commit: the member
// commits, for each partition, the offset of the next message to process
// (Kafka's convention). A stale generation is refused (409
// illegal_generation); a commit past a partition's pending retry ends the
// retry.
func (s *Server) commit(c echo.Context) error {
	var req commitRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	if req.Generation == nil {
		return catalog.InvalidRequest.New("generation is required (from the join's answer)")
	}
	if len(req.Offsets) == 0 {
		return catalog.InvalidRequest.New("offsets is empty")
	}
	tps := make([]groups.TopicPartition, len(req.Offsets))
	for i, o := range req.Offsets {
		t, err := cl.partitionOf(o.Topic, o.Partition)
		if err != nil {
			return err
		}
		if o.Offset < 0 {
			return catalog.InvalidRequest.Newf("offsets[%d]: offset must be ≥ 0", i)
		}
		tps[i] = groups.TopicPartition{TopicID: t.ID, Partition: o.Partition}
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	return s.asMember(c, cl, group, raw, 0, req.MemberID, *req.Generation, func(coord *groups.Coordinator, sess *memberSession) error {
		ctx := c.Request().Context()
		commits := make([]groups.OffsetCommit, len(req.Offsets))
		for i, o := range req.Offsets {
			commits[i] = groups.OffsetCommit{TopicPartition: tps[i], Offset: o.Offset, LeaderEpoch: -1}
			if r, ok := sess.retry[tps[i]]; ok && o.Offset <= r.Offset {
				commits[i].Metadata = r.metadata()
			}
		}
		if err := coord.CommitOffsets(ctx, cl.p.TenantID, group, req.MemberID, "", *req.Generation, commits); err != nil {
			return err
		}
		for i, o := range req.Offsets {
			if r, ok := sess.retry[tps[i]]; ok && o.Offset > r.Offset {
				delete(sess.retry, tps[i])
			}
		}
		return c.JSON(http.StatusOK, offsetsAnswer{Offsets: req.Offsets})
	})
}

// partitionOf checks that the caller may read one of its topics' partition.
func (cl *caller) partitionOf(topic string, p int32) (*wire.Topic, error) {
	t, ok := cl.v.Topic(cl.p.TenantID, topic)
	if !ok {
		return nil, catalog.TopicNotFound.Newf("no such topic: %q", topic)
	}
	if !cl.topicAllowed(topic, authz.OpRead) {
		return nil, catalog.TopicAccessDenied.Newf("the caller may not read topic %q", topic)
	}
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, catalog.PartitionNotFound.Newf("topic %q has partitions 0 to %d, not %d", topic, len(t.Partitions)-1, p)
	}
	return t, nil
}

type resetRequest struct {
	Topic       string  `json:"topic"`
	Partitions  []int32 `json:"partitions,omitempty"`
	To          string  `json:"to"`
	Offset      *int64  `json:"offset,omitempty"`
	TimestampMs *int64  `json:"timestamp_ms,omitempty"`
}

// reset serves POST /v1/groups/{group}/offsets:reset: it commits new
// offsets for a topic's partitions (all, or those listed): earliest,
// latest, an offset (clamped to the retained range) or the first offset
// at or after a timestamp. Like Kafka's admin reset it is refused (409
// group_not_empty) while the group has members.
func (s *Server) reset(c echo.Context) error {
	var req resetRequest
	cl, group, raw, err := s.bindGroup(c, &req)
	if err != nil {
		return err
	}
	switch {
	case req.To == "offset" && (req.Offset == nil || *req.Offset < 0):
		return catalog.InvalidRequest.New(`to "offset" needs offset ≥ 0`)
	case req.To == "timestamp" && (req.TimestampMs == nil || *req.TimestampMs < 0):
		return catalog.InvalidRequest.New(`to "timestamp" needs timestamp_ms ≥ 0`)
	case req.To != "earliest" && req.To != "latest" && req.To != "offset" && req.To != "timestamp":
		return catalog.InvalidRequest.New("to must be earliest, latest, offset or timestamp")
	}
	t, err := cl.partitionOf(req.Topic, 0)
	if err != nil {
		return err
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for p := range len(t.Partitions) {
			parts = append(parts, int32(p))
		}
	}
	for _, p := range parts {
		if _, err := cl.partitionOf(req.Topic, p); err != nil {
			return err
		}
	}
	if !cl.groupAllowed(group, authz.OpRead) {
		return catalog.GroupAccessDenied.New("")
	}
	return s.onCoordinator(c, cl, group, raw, 0, func(coord *groups.Coordinator) error {
		out := offsetsAnswer{Offsets: []offsetItem{}}
		var commits []groups.OffsetCommit
		for _, p := range parts {
			var ts *int64
			if req.To == "timestamp" {
				ts = req.TimestampMs
			}
			o, err := s.offsetsOf(c, t, cl, p, ts)
			if err != nil {
				return err
			}
			var off int64
			switch req.To {
			case "earliest":
				off = o.LogStartOffset
			case "latest":
				off = o.HighWatermark
			case "offset":
				off = min(max(*req.Offset, o.LogStartOffset), o.HighWatermark)
			case "timestamp":
				off = *o.Offset
			}
			commits = append(commits, groups.OffsetCommit{TopicPartition: groups.TopicPartition{TopicID: t.ID, Partition: p}, Offset: off, LeaderEpoch: -1})
			out.Offsets = append(out.Offsets, offsetItem{Topic: t.Name, Partition: p, Offset: off})
		}
		notEmpty := catalog.GroupNotEmpty.New("the consumer group has members; stop them (or let their sessions expire) before resetting its offsets")
		if d, err := coord.DescribeGroup(cl.p.TenantID, group); err == nil && len(d.Members) > 0 {
			return notEmpty
		}
		if err := coord.CommitOffsets(c.Request().Context(), cl.p.TenantID, group, "", "", -1, commits); err != nil {
			// An admin commit to a group with members is refused as if by an
			// unknown member.
			if catalog.Has(err, catalog.GroupNotEmpty) || catalog.Has(err, catalog.UnknownMember) || catalog.Has(err, catalog.RebalanceInProgress) {
				return notEmpty
			}
			return err
		}
		return c.JSON(http.StatusOK, out)
	})
}
