package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/controlplane/api"
	"github.com/sluicehq/sluice/controlplane/catalog"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/records"
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
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		secs := int((ra.RetryAfter() + time.Second - 1) / time.Second)
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
func toCatalog(err error) *catalog.Error {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return catalog.NotFound.New("no such route")
		case http.StatusMethodNotAllowed:
			return catalog.InvalidRequest.New("method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return catalog.BodyTooLarge.New("")
		}
		return catalog.Internal.Wrap(err, "")
	}
	return catalogued(err)
}

// leaderNoder is how the replication layer's not-leader errors are told
// apart without importing it: LeaderNode is the leader's node id.
type leaderNoder interface{ LeaderNode() (node int, ok bool) }

// catalogued turns an error of the partition layer into the catalogue's
// caller-safe form. Unknown errors become Internal; their cause goes to
// the log only.
func catalogued(err error) *catalog.Error {
	var ce *catalog.Error
	var ln leaderNoder
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &ln):
		return catalog.NotLeader.Wrap(err, "")
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return catalog.OffsetOutOfRange.Wrap(err, "")
	case errors.Is(err, log.ErrBatchTooLarge):
		return catalog.MessageTooLarge.Wrap(err, "")
	case errors.Is(err, log.ErrCorruptBatch), errors.Is(err, log.ErrInvalidMagic), errors.Is(err, records.ErrCorrupt):
		return catalog.CorruptMessage.Wrap(err, "")
	case errors.Is(err, context.DeadlineExceeded):
		return catalog.RequestTimedOut.Wrap(err, "")
	case errors.Is(err, context.Canceled):
		return catalog.Unavailable.Wrap(err, "the broker is shutting down or the client went away")
	default:
		return catalog.Internal.Wrap(err, "")
	}
}

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
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return nil, decodeError(err, s.cfg.MaxBodyBytes)
	}
	return raw, decodeStrict(raw, v, s.cfg.MaxBodyBytes)
}

// decodeStrict decodes exactly one JSON object with no unknown fields.
func decodeStrict(raw []byte, v any, limit int64) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return catalog.MalformedJSON.New("the body must hold exactly one JSON object")
	}
	return nil
}

func decodeError(err error, limit int64) error {
	var maxErr *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &maxErr):
		return catalog.BodyTooLarge.Newf("the body is larger than %d bytes", limit)
	case errors.Is(err, io.EOF):
		return catalog.MalformedJSON.New("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return catalog.MalformedJSON.New("the body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return catalog.MalformedJSON.Newf("invalid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return catalog.InvalidRequest.Newf("the body must be a JSON object, not %s", typeErr.Value)
		}
		return catalog.InvalidRequest.Newf("field %q must be %s, not %s", typeErr.Field, jsonType(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &b64):
		return catalog.InvalidRequest.Newf("a key, value or header value is not valid base64 (standard alphabet, padded): bad byte at %d", int64(b64))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this case.
		return catalog.UnknownField.Newf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return catalog.MalformedJSON.Wrap(err, "")
}

// jsonType names a Go type as the JSON a caller should send.
func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "[]uint8":
		return "a base64 string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "bool":
		return "a boolean"
	}
	return "an object"
}

// remoteError is the catalogue error another broker answered a forwarded
// request with.
func remoteError(status int, body api.Error) *catalog.Error {
	if e := catalog.Lookup(catalog.Code(body.Code)); e != nil {
		return e.New(body.Message)
	}
	return catalog.Internal.Wrap(fmt.Errorf("forwarded request answered %d with code %q: %s", status, body.Code, body.Message), "")
}
