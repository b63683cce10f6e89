package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/echoapi"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// handleError answers every failed request with the catalogue's {code,
// message, retriable}, as the control plane does; the cause goes to the
// log only.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ce := toCatalog(err)
	if ce.Entry.HTTPStatus >= 500 && ce.Entry != catalog.NotLeader {
		s.cfg.Logger.Error("http data api request failed", "method", c.Request().Method, "route", c.Path(), "code", ce.Entry.Code, "err", err)
	} else {
		s.cfg.Logger.Debug("http data api request rejected", "method", c.Request().Method, "route", c.Path(), "code", ce.Entry.Code, "err", err)
	}
	// Every 429 says when to retry: the wait the refusal names, rounded
	// up to whole seconds, or a second when it names none (a refusal
	// answered by another broker without one).
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) || ce.Entry.HTTPStatus == http.StatusTooManyRequests {
		var d time.Duration
		if ra != nil {
			d = ra.RetryAfter()
		}
		secs := int((d + time.Second - 1) / time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	if ce.Entry == catalog.Unauthenticated {
		c.Response().Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
	}
	_ = c.JSON(ce.Entry.HTTPStatus, errorBody(ce))
}

func errorBody(ce *catalog.Error) api.Error {
	return api.Error{Code: string(ce.Entry.Code), Message: ce.Message, Retriable: ce.Entry.Retriable}
}

// toCatalog maps echo's own errors (routing, body limit) and the data
// plane's errors into the catalogue.
func toCatalog(err error) *catalog.Error { return echoapi.ToCatalog(err, catalogued) }

// catalogued is the front doors' one mapping of the partition layer's
// errors onto the catalogue.
func catalogued(err error) *catalog.Error { return frontdoor.Catalogued(err) }

// bind decodes a JSON body strictly: one object, no unknown fields,
// within the body size limit, as the control plane's API does.
func (s *Server) bind(c echo.Context, v any) error {
	_, err := s.bindRaw(c, v)
	return err
}

// bindRaw is bind that also returns the body's bytes, for requests that
// may be forwarded as they are.
func (s *Server) bindRaw(c echo.Context, v any) ([]byte, error) {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return nil, catalog.InvalidRequest.Newf("content type %q is not supported; send application/json", ct)
	}
	return catalog.ReadJSON(http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes), v, s.cfg.MaxBodyBytes)
}

// bindGroup starts every /v1/groups/{group} handler that takes a body:
// the caller, the group the path names, and the body bound into v, kept
// raw to forward to the group's coordinator.
func (s *Server) bindGroup(c echo.Context, v any) (cl *caller, group string, raw []byte, err error) {
	raw, err = s.bindRaw(c, v)
	return callerOf(c), c.Param("group"), raw, err
}

// retryLater is an error with the wait its Retry-After header names.
type retryLater struct {
	err   error
	after time.Duration
}

func (e retryLater) Error() string             { return e.err.Error() }
func (e retryLater) Unwrap() error             { return e.err }
func (e retryLater) RetryAfter() time.Duration { return e.after }

// retryAfterOf gives err a Retry-After of d; with d zero it is err.
func retryAfterOf(err error, d time.Duration) error {
	if d <= 0 || err == nil {
		return err
	}
	return retryLater{err: err, after: d}
}

// retryAfter is the wait an error names for its Retry-After, zero if none.
func retryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// remoteError is the catalogue error another broker answered a forwarded
// request with.
func remoteError(status int, body api.Error) *catalog.Error {
	if e := catalog.Lookup(catalog.Code(body.Code)); e != nil {
		return e.New(body.Message)
	}
	return catalog.Internal.Wrap(fmt.Errorf("forwarded request answered %d with code %q: %s", status, body.Code, body.Message), "")
}
