package controlplane

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDoc describes /v1. A test checks it against the registered routes.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document of the /v1 API.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
