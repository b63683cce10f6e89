package httpapi

import (
	_ "embed"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/contract/echoapi"
)

// openAPIDoc describes the data API's /v1 routes. Tests check it against
// the registered routes and its schemas against the request and answer
// types.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document of the HTTP data API.
func OpenAPI() []byte { return openAPIDoc }

// openAPI serves the document without credentials: it names no tenant's
// data, and clients read it before they have a key.
func (s *Server) openAPI(c echo.Context) error { return serveOpenAPI(c) }

var serveOpenAPI = echoapi.ServeDoc(openAPIDoc)
