package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/echoapi"
)

// handleError answers every failed request with the catalogue's {code,
// message}; the cause goes to the log only.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if c.Request().Context().Err() != nil && errors.Is(err, c.Request().Context().Err()) {
		// The caller went away (a long-poll's client timed out, a browser
		// navigated on): nobody reads an answer, and nothing failed here.
		s.log.Debug("request abandoned by its caller", "method", c.Request().Method, "path", c.Path(), "err", err)
		return
	}
	ce := toCatalog(err)
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusNotFound { // no route, not a missing resource
		if allow := s.methodsOf(c.Request().URL.Path); len(allow) > 0 {
			c.Response().Header().Set("Allow", strings.Join(allow, ", "))
			ce = catalog.MethodNotAllowed.Newf("%s takes %s", c.Request().URL.Path, strings.Join(allow, ", "))
		}
	}
	if ce.Entry.HTTPStatus >= 500 {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "code", ce.Entry.Code, "err", err)
	} else {
		s.log.Debug("request rejected", "method", c.Request().Method, "path", c.Path(), "code", ce.Entry.Code, "err", err)
	}
	if ra, ok := retryAfter(err); ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
	}
	body := api.Error{Code: string(ce.Entry.Code), Message: ce.Message, Retriable: ce.Entry.Retriable}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ce.Entry.HTTPStatus)
		return
	}
	_ = c.JSON(ce.Entry.HTTPStatus, body)
}

// toCatalog maps echo's own errors (routing, body limit) into the catalogue.
func toCatalog(err error) *catalog.Error { return echoapi.ToCatalog(err, catalog.Of) }

// rateLimitedError is a rate_limited error that knows when to retry.
type rateLimitedError struct {
	ce   *catalog.Error
	wait time.Duration
}

func (e rateLimitedError) Error() string { return e.ce.Error() }
func (e rateLimitedError) Unwrap() error { return e.ce }

func rateLimited(wait time.Duration, msg string) error {
	return rateLimitedError{ce: catalog.RateLimited.New(msg), wait: wait}
}

func retryAfter(err error) (time.Duration, bool) {
	var rl rateLimitedError
	if errors.As(err, &rl) {
		return rl.wait, true
	}
	return 0, false
}

// bind decodes a JSON body strictly: one object, no unknown fields, within
// the size limit.
func (s *Server) bind(c echo.Context, v any) error {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return catalog.InvalidRequest.Newf("content type %q is not supported; send application/json", ct)
	}
	_, err := catalog.ReadJSON(http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes), v, s.cfg.MaxBodyBytes)
	return err
}

// dbError maps a database failure to the catalogue.
func dbError(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NotFound.Wrap(err, "")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return catalog.AlreadyExists.Wrap(err, "")
	}
	return catalog.Internal.Wrap(fmt.Errorf("%s: %w", op, err), "")
}

// insertNew runs an INSERT in tx, answering taken in place of a unique
// violation: the refusal every create has for an id, name or node id
// already in use.
func insertNew(ctx context.Context, tx pgx.Tx, taken error, sql string, args ...any) error {
	_, err := tx.Exec(ctx, sql, args...)
	if isUniqueViolation(err) {
		return taken
	}
	return err
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// methodsOf lists the methods the routes matching path take (none when no
// route has that path), so a wrong method gets 405 with Allow, not 404.
func (s *Server) methodsOf(path string) []string {
	var out []string
	for _, r := range s.Routes() {
		if routeMatches(r.Path, path) && !slices.Contains(out, r.Method) {
			out = append(out, r.Method)
		}
	}
	slices.Sort(out)
	return out
}

// routeMatches reports whether an echo route pattern (literal segments and
// :params) matches a request path.
func routeMatches(pattern, path string) bool {
	ps, rs := strings.Split(pattern, "/"), strings.Split(strings.TrimSuffix(path, "/"), "/")
	if len(ps) != len(rs) {
		return false
	}
	for i, p := range ps {
		switch {
		case strings.HasPrefix(p, ":"):
			if rs[i] == "" {
				return false
			}
		case strings.Contains(p, "*"):
			return false
		case p != rs[i]:
			return false
		}
	}
	return true
}
