package controlplane_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/echoapi"
	"github.com/sluicehq/sluice/controlplane"
)

// The OpenAPI document and the registered routes name exactly the same
// operations.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(controlplane.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, echoapi.Route(method, path))
		}
	}
	e := newEnv(t)
	var registered []string
	for _, r := range e.srv.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") {
			registered = append(registered, r.Method+" "+r.Path)
		}
	}
	undocumented, unregistered := echoapi.Unmatched(documented, registered)
	for _, r := range undocumented {
		t.Errorf("route %s is not in openapi.json", r)
	}
	for _, d := range unregistered {
		t.Errorf("openapi.json documents %s, which is not registered", d)
	}
}
