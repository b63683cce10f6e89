package controlplane_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/controlplane"
)

// Every operation in the OpenAPI document has a summary and a description
// (what it does, who may call it, its notable errors), so a route added
// to the document without saying what it does fails here.
func TestOpenAPIOperationsDescribed(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Summary     string `json:"summary"`
			Description string `json:"description"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(controlplane.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			n++
			name := strings.ToUpper(method) + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", name)
			}
			if strings.TrimSpace(op.Summary) == "" {
				t.Errorf("%s has no summary", name)
			}
			switch d := strings.TrimSpace(op.Description); {
			case d == "":
				t.Errorf("%s has no description", name)
			case d == strings.TrimSpace(op.Summary):
				t.Errorf("%s: the description only repeats the summary", name)
			}
		}
	}
	if n == 0 {
		t.Fatal("openapi.json has no operations")
	}
}
