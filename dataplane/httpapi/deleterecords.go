package httpapi

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

type deleteRecordsRequest struct {
	// BeforeOffset: records below it are deleted; -1 means the high
	// watermark (everything committed).
	BeforeOffset *int64 `json:"before_offset"`
}

type deleteRecordsResponse struct {
	LogStartOffset int64 `json:"log_start_offset"`
}

// deleteRecords serves POST
// /v1/topics/{topic}/partitions/{p}/records:delete {"before_offset":n}:
// Kafka's DeleteRecords. The partition's log start offset moves forward to
// n (-1: the high watermark) through its leader, replicated, and the answer
// is the new log start. It needs delete on the topic; an offset above the
// high watermark is 416 offset_out_of_range and changes nothing; an offset
// at or below the log start changes nothing.
func (s *Server) deleteRecords(c echo.Context) error {
	cl := callerOf(c)
	name := c.Param("topic")
	t, ok := cl.v.Topic(cl.p.TenantID, name)
	if !ok {
		return catalog.TopicNotFound.Newf("no such topic: %q", name)
	}
	if !cl.topicAllowed(name, authz.OpDelete) {
		return catalog.TopicAccessDenied.Newf("the caller may not delete records of topic %q", name)
	}
	pn, err := strconv.ParseInt(c.Param("partition"), 10, 32)
	if err != nil || pn < 0 || int(pn) >= len(t.Partitions) {
		return catalog.PartitionNotFound.Newf("the topic has partitions 0 to %d, not %q", len(t.Partitions)-1, c.Param("partition"))
	}
	var req deleteRecordsRequest
	raw, err := s.bindRaw(c, &req)
	if err != nil {
		return err
	}
	if req.BeforeOffset == nil || *req.BeforeOffset < -1 {
		return catalog.InvalidRequest.New("before_offset is required: an offset ≥ 0, or -1 for the high watermark")
	}
	part, leader, known := s.leaderOf(c.Request().Context(), t, int32(pn))
	switch {
	case !known:
		return frontdoor.NoLeader(part, "the partition has no leader right now; retry")
	case leader != s.cfg.NodeID:
		return s.proxy(c, cl.v, leader, raw, 0)
	}
	start, err := part.DeleteRecords(c.Request().Context(), *req.BeforeOffset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deleteRecordsResponse{LogStartOffset: start})
}
