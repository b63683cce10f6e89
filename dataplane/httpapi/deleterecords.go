package httpapi

import (
	"fmt"
	"net/http"

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
	denied := fmt.Sprintf("the caller may not delete records of topic %q", c.Param("topic"))
	t, pn, err := cl.routePartition(c, denied, authz.OpDelete)
	if err != nil {
		return err
	}
	var req deleteRecordsRequest
	raw, err := s.bindRaw(c, &req)
	if err != nil {
		return err
	}
	if req.BeforeOffset == nil || *req.BeforeOffset < -1 {
		return catalog.InvalidRequest.New("before_offset is required: an offset ≥ 0, or -1 for the high watermark")
	}
	part, leader, known := s.leaderOf(c.Request().Context(), t, pn)
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
