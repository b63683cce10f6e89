package controlplane

import (
	_ "embed"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/contract/echoapi"
)

// openAPIDoc describes /v1. A test checks it against the registered routes.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document of the /v1 API.
func OpenAPI() []byte { return openAPIDoc }

var serveOpenAPI = echoapi.ServeDoc(openAPIDoc)

func (s *Server) openAPI(c echo.Context) error { return serveOpenAPI(c) }
