package controlplane

import (
	"context"
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
// answers with one page of its items, each read by scan (a resource's
// scanner of one row, shared with its reads by id).
func listPage[T any](c echo.Context, s *Server, op string, pg page, scan func(pgx.Row) (T, error),
	key func(T) string, sql string, args ...any) error {
	rows, err := s.db.Query(c.Request().Context(), sql, args...)
	if err != nil {
		return dbError(op, err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return dbError(op, err)
	}
	items, next := trim(pg, all, key)
	return c.JSON(http.StatusOK, api.Page[T]{Items: items, NextPageToken: next})
}

// afterID is an id-ordered page's token: the last id of the page before.
func afterID(pg page) (int64, error) {
	if pg.after == "" {
		return 0, nil
	}
	after, err := strconv.ParseInt(pg.after, 10, 64)
	if err != nil {
		return 0, catalog.InvalidPageToken.New("")
	}
	return after, nil
}

// idFilter is the WHERE clause of an id-ordered list of rows aliased m,
// with its arguments: the page's start, then each filter the query asks
// for, numbered in the order they are added.
type idFilter struct {
	where string
	args  []any
}

// and narrows the list to rows whose column equals v.
func (f *idFilter) and(column string, v any) {
	f.args = append(f.args, v)
	f.where += ` AND ` + column + ` = $` + strconv.Itoa(len(f.args))
}

// operatorIDPage starts a platform operator's id-ordered list: the page
// asked for and the filter of the rows after its token's id.
func (s *Server) operatorIDPage(c echo.Context) (page, *idFilter, error) {
	pg, err := s.operatorPage(c)
	if err != nil {
		return pg, nil, err
	}
	after, err := afterID(pg)
	if err != nil {
		return pg, nil, err
	}
	return pg, &idFilter{where: `WHERE m.id > $1`, args: []any{after}}, nil
}

// listByID answers one page of what load finds by f in id order, fetching
// the page's limit plus one rows to know whether a next page exists.
func listByID[T any](c echo.Context, op string, pg page, f *idFilter,
	load func(ctx context.Context, where string, args ...any) ([]T, error), id func(T) int64) error {
	f.args = append(f.args, pg.limit+1)
	all, err := load(c.Request().Context(), f.where+` ORDER BY m.id LIMIT $`+strconv.Itoa(len(f.args)), f.args...)
	if err != nil {
		return dbError(op, err)
	}
	items, next := trim(pg, all, func(v T) string { return strconv.FormatInt(id(v), 10) })
	return c.JSON(http.StatusOK, api.Page[T]{Items: items, NextPageToken: next})
}
