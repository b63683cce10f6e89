package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// The group endpoints run on the group's coordinator, which need not lead
// the partitions they read: these helpers read on the local leader or ask
// the leader's broker through the partition endpoints, as the caller.

// readPart reads committed messages of a partition from offset without
// waiting, wherever its leader is; local reports whether this broker
// read them (rather than the leader's, which then counted their bytes).
func (s *Server) readPart(c echo.Context, v *wire.Topic, cl *caller, p int32, offset int64, maxBytes int32) (rr *readResponse, local bool, err error) {
	part, leader, known := s.leaderOf(c.Request().Context(), v, p)
	switch {
	case !known:
		return nil, false, frontdoor.NoLeader(part, "the partition has no leader right now; retry")
	case leader == s.cfg.NodeID:
		msgs, billed, next, hw, err := readOnce(part, p, offset, maxBytes)
		if err != nil {
			return nil, true, err
		}
		return &readResponse{Messages: msgs, NextOffset: next, HighWatermark: hw, LogStartOffset: part.LogStartOffset(), billed: billed}, true, nil
	}
	uri := fmt.Sprintf("/v1/topics/%s/partitions/%d/messages?offset=%d&max_bytes=%d", url.PathEscape(v.Name), p, offset, maxBytes)
	var out readResponse
	if err := s.forwardJSON(c, cl, leader, uri, &out); err != nil {
		return nil, false, err
	}
	return &out, false, nil
}

// forwardJSON GETs uri from broker node and decodes a 200 answer into out;
// any other answer is its catalogue error, with its Retry-After.
func (s *Server) forwardJSON(c echo.Context, cl *caller, node int, uri string, out any) error {
	a, err := s.forward(c, cl.v, node, http.MethodGet, uri, nil, 0)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		var e api.Error
		if json.Unmarshal(a.body, &e) != nil || e.Code == "" {
			return fmt.Errorf("broker %d answered %s with %d: %.200q", node, uri, a.status, a.body)
		}
		return retryAfterOf(remoteError(a.status, e), a.retryAfter)
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("decode answer of broker %d to %s: %w", node, uri, err)
	}
	return nil
}

type offsetsResponse struct {
	LogStartOffset int64  `json:"log_start_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	Offset         *int64 `json:"offset,omitempty"`
}

// offsetsOf is a partition's log start offset and high watermark and,
// when ts is set, the first offset whose timestamp is ≥ ts (the high
// watermark if none is), wherever its leader is.
func (s *Server) offsetsOf(c echo.Context, t *wire.Topic, cl *caller, p int32, ts *int64) (*offsetsResponse, error) {
	part, leader, known := s.leaderOf(c.Request().Context(), t, p)
	switch {
	case !known:
		return nil, frontdoor.NoLeader(part, "the partition has no leader right now; retry")
	case leader == s.cfg.NodeID:
		out := &offsetsResponse{LogStartOffset: part.LogStartOffset(), HighWatermark: part.HighWatermark()}
		if ts != nil {
			off, found, err := part.OffsetForTimestamp(*ts)
			if err != nil {
				return nil, err
			}
			if !found {
				off = out.HighWatermark
			}
			out.Offset = &off
		}
		return out, nil
	}
	uri := fmt.Sprintf("/v1/topics/%s/partitions/%d/offsets", url.PathEscape(t.Name), p)
	if ts != nil {
		uri += "?timestamp_ms=" + strconv.FormatInt(*ts, 10)
	}
	var out offsetsResponse
	if err := s.forwardJSON(c, cl, leader, uri, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// partitionOffsets serves GET /v1/topics/{topic}/partitions/{p}/offsets
// [?timestamp_ms=]: the partition's log start offset and high watermark,
// and the first offset at or after a time.
func (s *Server) partitionOffsets(c echo.Context) error {
	cl := callerOf(c)
	t, pn, err := cl.routePartition(c, "", authz.OpRead, authz.OpDescribe)
	if err != nil {
		return err
	}
	var ts *int64
	for k, vals := range c.QueryParams() {
		if k != "timestamp_ms" {
			return catalog.InvalidRequest.Newf("unknown query parameter %q; use timestamp_ms", k)
		}
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil || n < 0 {
			return catalog.InvalidRequest.New("timestamp_ms must be milliseconds since the Unix epoch")
		}
		ts = &n
	}
	out, err := s.offsetsOf(c, t, cl, pn, ts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
