// Package echoapi holds what the control plane's API and the HTTP data API,
// both echo servers, do the same way: map echo's own errors into the
// catalogue and serve an embedded OpenAPI document. Both planes may import
// it; it imports nothing of either.
package echoapi

import (
	"errors"
	"net/http"

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
