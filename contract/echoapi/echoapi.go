// Package echoapi holds what the control plane's API and the HTTP data API,
// both echo servers, do the same way: map echo's own errors into the
// catalogue and serve an embedded OpenAPI document. Both planes may import
// it; it imports nothing of either.
package echoapi

import (
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
)

// ToCatalog maps echo's own errors (routing, body limit, authentication)
// into the catalogue and every other error with rest.
func ToCatalog(err error, rest func(error) *catalog.Error) *catalog.Error {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return catalog.NotFound.New("no such route")
		case http.StatusMethodNotAllowed:
			return catalog.InvalidRequest.New("method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return catalog.BodyTooLarge.New("")
		case http.StatusUnauthorized:
			return catalog.Unauthenticated.New("")
		}
		return catalog.Internal.Wrap(err, "")
	}
	return rest(err)
}

// ServeDoc answers with doc, an OpenAPI document, as JSON.
func ServeDoc(doc []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
	}
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// Route names an OpenAPI operation as echo names its route: "GET
// /v1/topics/:name" for get on /v1/topics/{name}.
func Route(method, path string) string {
	return strings.ToUpper(method) + " " + pathParam.ReplaceAllString(path, ":$1")
}

// Unmatched compares the routes a document names with those a server
// registers: what is registered but not documented, and what is documented
// but not registered, each sorted.
func Unmatched(documented, registered []string) (undocumented, unregistered []string) {
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			undocumented = append(undocumented, r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			unregistered = append(unregistered, d)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unregistered)
	return undocumented, unregistered
}
