package controlplane

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
)

const (
	defaultPageSize = 50
	maxPageSize     = 200
)

// page is a keyset page request: items sort by a unique key and a page
// starts after the last key of the previous one.
type page struct {
	limit int
	after string
}

func pageOf(c echo.Context) (page, error) {
	p := page{limit: defaultPageSize}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return p, catalog.InvalidRequest.Newf("limit must be a whole number from 1 to %d", maxPageSize)
		}
		p.limit = n
	}
	if v := c.QueryParam("page_token"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return p, catalog.InvalidPageToken.New("")
		}
		p.after = string(b)
	}
	return p, nil
}

// tenantPage starts a tenant's list: the caller, who must be allowed to
// read obj, and the page asked for.
func (s *Server) tenantPage(c echo.Context, obj string) (*principal, page, error) {
	p, err := s.tenantCaller(c, obj, authz.ActRead)
	if err != nil {
		return nil, page{}, err
	}
	pg, err := pageOf(c)
	return p, pg, err
}

// operatorPage starts a platform operator's list: the page asked for, once
// the caller is an operator who may read.
func (s *Server) operatorPage(c echo.Context) (page, error) {
	if _, err := s.operatorCaller(c, authz.ActRead); err != nil {
		return page{}, err
	}
	return pageOf(c)
}

// trim cuts a result fetched with limit+1 rows to the page and returns the
// token of the next page ("" when this is the last).
func trim[T any](p page, items []T, key func(T) string) ([]T, string) {
	if items == nil {
		items = []T{}
	}
	if len(items) <= p.limit {
		return items, ""
	}
	items = items[:p.limit]
	return items, base64.RawURLEncoding.EncodeToString([]byte(key(items[len(items)-1])))
}

// listPage runs a keyset-paged query that fetches page.limit+1 rows and
// answers with one page of its items.
func listPage[T any](c echo.Context, s *Server, op string, pg page, scan func(pgx.CollectableRow) (T, error),
	key func(T) string, sql string, args ...any) error {
	rows, err := s.db.Query(c.Request().Context(), sql, args...)
	if err != nil {
		return dbError(op, err)
	}
	all, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return dbError(op, err)
	}
	items, next := trim(pg, all, key)
	return c.JSON(http.StatusOK, api.Page[T]{Items: items, NextPageToken: next})
}
