package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// syncUsageWait bounds how long a handler waits, after writing its
// answer, for the answer's usage to be committed (usage.Meter.Sync)
// before the connection's next request is served: past it the counts
// stay queued for the next flush.
const syncUsageWait = 5 * time.Second

// meteredRead is what one read of a topic delivered: bytes out (the
// stored batch bytes of the messages, usage.BatchShare) and messages
// out.
type meteredRead struct {
	topicID         string
	bytes, messages int64
}

// readOf is what rr, read from the leader's replica, delivers.
func readOf(topicID string, rr *readResponse) meteredRead {
	return meteredRead{topicID: topicID, bytes: rr.billed, messages: int64(len(rr.Messages))}
}

// writeMetered writes body as the 200 answer of a read, then counts
// reads, once the answer is written and flushed to the connection: an
// answer the client is gone before (its request's context ended) is not
// written, and one the connection refuses is not counted, so neither is
// billed, and the client's retry is billed once. It then syncs the
// counts before returning, and so before the connection's next request.
// A crash after the write and before the sync loses the counts of that
// answer: the customer-friendly direction. The answer carries its
// Content-Length, so the client has all of it once it is flushed.
func (s *Server) writeMetered(c echo.Context, body any, reads []meteredRead) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(body); err != nil {
		return err
	}
	if h := s.beforeReadWrite.Load(); h != nil {
		(*h)(c.Request())
	}
	ctx := c.Request().Context()
	if err := ctx.Err(); err != nil {
		return err // the client left: nothing written, nothing counted
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.Header().Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return nil // the answer is committed: nothing else can be said
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return nil
	}
	if s.cfg.Usage == nil {
		return nil
	}
	counted := false
	for _, r := range reads {
		if r.messages > 0 {
			s.cfg.Usage.Fetched(callerOf(c).p.TenantID, r.topicID, r.bytes, r.messages)
			counted = true
		}
	}
	if counted {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncUsageWait)
		defer cancel()
		_ = s.cfg.Usage.Sync(sctx)
	}
	return nil
}
