package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/echoapi"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// The tests here need the router and the handlers' types, not a cell: a
// Server on an empty cell state serves the routes without reaching a
// partition.

// noPartitions holds no replica.
type noPartitions struct{}

func (noPartitions) Get(string, int32) (Partition, bool) { return nil, false }

// oneProducerID hands out producer id 7.
type oneProducerID struct{}

func (oneProducerID) Next(context.Context) (int64, error) { return 7, nil }

func newDocServer(t *testing.T) *Server {
	t.Helper()
	st, err := cellview.New(cellview.Config{Cell: "c1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Addr: "127.0.0.1:0", NodeID: 1, State: st, Partitions: noPartitions{}, ProducerIDs: oneProducerID{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openAPIDocument is the part of the document the tests read.
type openAPIDocument struct {
	OpenAPI    string                                 `json:"openapi"`
	Security   []map[string][]string                  `json:"security"`
	Paths      map[string]map[string]openAPIOperation `json:"paths"`
	Components struct {
		SecuritySchemes map[string]map[string]string `json:"securitySchemes"`
		Parameters      map[string]openAPIParameter  `json:"parameters"`
		Responses       map[string]openAPIResponse   `json:"responses"`
		Schemas         map[string]openAPISchema     `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string             `json:"operationId"`
	Summary     string             `json:"summary"`
	Description string             `json:"description"`
	Parameters  []openAPIParameter `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema openAPISchema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]openAPIResponse `json:"responses"`
	Security  *[]map[string][]string     `json:"security"`
}

type openAPIParameter struct {
	Ref      string `json:"$ref"`
	Name     string `json:"name"`
	In       string `json:"in"`
	Required bool   `json:"required"`
}

type openAPIResponse struct {
	Ref     string                     `json:"$ref"`
	Headers map[string]json.RawMessage `json:"headers"`
	Content map[string]struct {
		Schema openAPISchema `json:"schema"`
	} `json:"content"`
}

type openAPISchema struct {
	Ref        string                   `json:"$ref"`
	Type       string                   `json:"type"`
	Format     string                   `json:"format"`
	Properties map[string]openAPISchema `json:"properties"`
	Required   []string                 `json:"required"`
	Items      *openAPISchema           `json:"items"`
}

func loadOpenAPI(t *testing.T) *openAPIDocument {
	t.Helper()
	var doc openAPIDocument
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return &doc
}

// refName is the component a $ref names ("" if none).
func refName(ref, kind string) string {
	return strings.TrimPrefix(ref, "#/components/"+kind+"/")
}

// notDocumented are the routes outside the document: operations'
// endpoints, not the API's.
var notDocumented = []string{"GET /healthz"}

// The document and the router name exactly the same operations, and each
// path's parameters are declared.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	param := regexp.MustCompile(`\{([a-z_]+)\}`)
	var documented []string
	for path, ops := range doc.Paths {
		want := map[string]bool{}
		for _, m := range param.FindAllStringSubmatch(path, -1) {
			want[m[1]] = true
		}
		for method, op := range ops {
			documented = append(documented, echoapi.Route(method, path))
			got := map[string]bool{}
			for _, p := range op.Parameters {
				if p.Ref != "" {
					p = doc.Components.Parameters[refName(p.Ref, "parameters")]
				}
				if p.In == "path" {
					got[p.Name] = p.Required
				}
			}
			for name := range want {
				if !got[name] {
					t.Errorf("%s %s: path parameter %q is not declared as required", method, path, name)
				}
			}
			for name := range got {
				if !want[name] {
					t.Errorf("%s %s: declares path parameter %q, which is not in the path", method, path, name)
				}
			}
		}
	}
	var registered []string
	for _, r := range newDocServer(t).echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue // the authenticated group's catch-all
		}
		route := r.Method + " " + strings.ReplaceAll(r.Path, `\:`, ":")
		if !slices.Contains(notDocumented, route) {
			registered = append(registered, route)
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

// Every operation says what it is and does, answers at least one success
// and (but for the document itself) one client error, and names an error
// schema for its errors;
// everything but the document itself needs an API key.
func TestOpenAPIOperationsDescribed(t *testing.T) {
	doc := loadOpenAPI(t)
	if len(doc.Security) != 1 || doc.Security[0]["apiKey"] == nil {
		t.Errorf("document security %v, want apiKey", doc.Security)
	}
	if s := doc.Components.SecuritySchemes["apiKey"]; s["type"] != "http" || s["scheme"] != "basic" {
		t.Errorf("apiKey security scheme %v, want http basic", s)
	}
	ids := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			name := strings.ToUpper(method) + " " + path
			switch {
			case op.OperationID == "":
				t.Errorf("%s has no operationId", name)
			case ids[op.OperationID] != "":
				t.Errorf("%s and %s share operationId %q", name, ids[op.OperationID], op.OperationID)
			}
			ids[op.OperationID] = name
			if strings.TrimSpace(op.Summary) == "" {
				t.Errorf("%s has no summary", name)
			}
			if len(strings.Fields(op.Description)) < 10 {
				t.Errorf("%s has no description worth the name: %q", name, op.Description)
			}
			var ok2xx, err4xx bool
			for status, r := range op.Responses {
				if r.Ref != "" {
					rr, found := doc.Components.Responses[refName(r.Ref, "responses")]
					if !found {
						t.Errorf("%s %s: no such response %s", name, status, r.Ref)
					}
					r = rr
				}
				ok2xx = ok2xx || strings.HasPrefix(status, "2")
				if strings.HasPrefix(status, "4") || strings.HasPrefix(status, "5") || status == "default" {
					err4xx = err4xx || strings.HasPrefix(status, "4")
					if got := refName(r.Content["application/json"].Schema.Ref, "schemas"); got != "Error" {
						t.Errorf("%s %s: error schema %q, want Error", name, status, got)
					}
				}
			}
			// The document itself takes no input, so it has no client
			// error to document.
			if !ok2xx || !err4xx && op.OperationID != "getDataOpenAPI" {
				t.Errorf("%s needs a 2xx and a 4xx response, has %v", name, slices.Sorted(maps.Keys(op.Responses)))
			}
			public := op.Security != nil && len(*op.Security) == 0
			if public != (path == "/v1/openapi.json") {
				t.Errorf("%s: public %v", name, public)
			}
			if !public && op.Responses["401"].Ref == "" {
				t.Errorf("%s needs an API key but documents no 401", name)
			}
		}
	}
	if h := doc.Components.Responses["TooManyRequests"].Headers; h["Retry-After"] == nil {
		t.Error("429 documents no Retry-After header")
	}
}

// schemaTypes are the Go types of the document's schemas.
var schemaTypes = map[string]struct {
	typ reflect.Type
	// answer is set for types the API writes: a field it always writes
	// (no omitempty) must then be required.
	answer bool
}{
	"Error":                 {reflect.TypeOf(api.Error{}), true},
	"Header":                {reflect.TypeOf(jsonHeader{}), false},
	"PublishMessage":        {reflect.TypeOf(publishMessage{}), false},
	"PublishRequest":        {reflect.TypeOf(publishRequest{}), false},
	"PublishResult":         {reflect.TypeOf(publishResult{}), true},
	"PublishResponse":       {reflect.TypeOf(publishResponse{}), true},
	"Message":               {reflect.TypeOf(Message{}), true},
	"ReadResponse":          {reflect.TypeOf(readResponse{}), true},
	"OffsetsResponse":       {reflect.TypeOf(offsetsResponse{}), true},
	"TopicPartition":        {reflect.TypeOf(topicPartition{}), true},
	"JoinRequest":           {reflect.TypeOf(joinRequest{}), false},
	"JoinResponse":          {reflect.TypeOf(joinResponse{}), true},
	"GroupFetchRequest":     {reflect.TypeOf(groupFetchRequest{}), false},
	"PartitionState":        {reflect.TypeOf(partitionState{}), true},
	"GroupFetchResponse":    {reflect.TypeOf(groupFetchResponse{}), true},
	"OffsetItem":            {reflect.TypeOf(offsetItem{}), true},
	"CommitRequest":         {reflect.TypeOf(commitRequest{}), false},
	"OffsetsAnswer":         {reflect.TypeOf(offsetsAnswer{}), true},
	"ResetRequest":          {reflect.TypeOf(resetRequest{}), false},
	"NackRequest":           {reflect.TypeOf(nackRequest{}), false},
	"NackResponse":          {reflect.TypeOf(nackResponse{}), true},
	"RedriveRequest":        {reflect.TypeOf(redriveRequest{}), false},
	"RedriveResponse":       {reflect.TypeOf(redriveResponse{}), true},
	"DeleteRecordsRequest":  {reflect.TypeOf(deleteRecordsRequest{}), false},
	"DeleteRecordsResponse": {reflect.TypeOf(deleteRecordsResponse{}), true},
	// ProducerID is a map the handler writes; TestOpenAPIProducerID
	// checks it against an answer.
	"ProducerID": {},
}

// operationSchemas are the request body and success answer each
// operation documents.
var operationSchemas = map[string]struct{ request, answer string }{
	"getDataOpenAPI":      {"", ""},
	"publish":             {"PublishRequest", "PublishResponse"},
	"readPartition":       {"", "ReadResponse"},
	"getPartitionOffsets": {"", "OffsetsResponse"},
	"createProducerID":    {"", "ProducerID"},
	"joinGroup":           {"JoinRequest", "JoinResponse"},
	"leaveGroup":          {"", ""},
	"fetchGroupMessages":  {"GroupFetchRequest", "GroupFetchResponse"},
	"nackGroupMessage":    {"NackRequest", "NackResponse"},
	"commitGroupOffsets":  {"CommitRequest", "OffsetsAnswer"},
	"resetGroupOffsets":   {"ResetRequest", "OffsetsAnswer"},
	"redriveDeadLetters":  {"RedriveRequest", "RedriveResponse"},
	"deleteRecords":       {"DeleteRecordsRequest", "DeleteRecordsResponse"},
}

// The schemas' properties are the json names of the Go types' fields,
// with matching JSON types and nested schemas, so adding or renaming a
// field fails here until the document says so.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	byType := map[reflect.Type]string{}
	for name, st := range schemaTypes {
		if st.typ != nil {
			byType[st.typ] = name
		}
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s is missing from openapi.json", name)
		}
	}
	for name, sc := range doc.Components.Schemas {
		st, ok := schemaTypes[name]
		if !ok {
			t.Errorf("schema %s has no Go type in schemaTypes", name)
			continue
		}
		for _, r := range sc.Required {
			if _, ok := sc.Properties[r]; !ok {
				t.Errorf("schema %s requires %q, which it does not have", name, r)
			}
		}
		if st.typ == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			fields := map[string]reflect.StructField{}
			for i := range st.typ.NumField() {
				f := st.typ.Field(i)
				tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || tag == "-" {
					continue
				}
				if f.Anonymous || tag == "" {
					t.Fatalf("field %s has no json name; name it", f.Name)
				}
				fields[tag] = f
				if st.answer && !strings.Contains(opts, "omitempty") && !slices.Contains(sc.Required, tag) {
					t.Errorf("%q is always written but not required", tag)
				}
			}
			got := slices.Sorted(maps.Keys(sc.Properties))
			want := slices.Sorted(maps.Keys(fields))
			if !slices.Equal(got, want) {
				t.Fatalf("properties %v, Go type %s has %v", got, st.typ, want)
			}
			for tag, f := range fields {
				checkSchemaType(t, tag, sc.Properties[tag], f.Type, byType)
			}
		})
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			want, ok := operationSchemas[op.OperationID]
			if !ok {
				t.Errorf("%s %s: operation %q is not in operationSchemas", method, path, op.OperationID)
				continue
			}
			var req string
			if op.RequestBody != nil {
				req = refName(op.RequestBody.Content["application/json"].Schema.Ref, "schemas")
			}
			if req != want.request {
				t.Errorf("%s: request body %q, want %q", op.OperationID, req, want.request)
			}
			for status, r := range op.Responses {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				s := r.Content["application/json"].Schema
				if got := refName(s.Ref, "schemas"); (s.Ref != "" || want.answer != "") && got != want.answer {
					t.Errorf("%s %s: answer %q, want %q", op.OperationID, status, got, want.answer)
				}
			}
		}
	}
}

// checkSchemaType checks that a property's schema is the JSON form of Go
// type typ: a struct by its schema's $ref, a slice by its items.
func checkSchemaType(t *testing.T, name string, s openAPISchema, typ reflect.Type, byType map[reflect.Type]string) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ.Kind() == reflect.Struct:
		if want := byType[typ]; want == "" || refName(s.Ref, "schemas") != want {
			t.Errorf("%s: $ref %q, want the schema of %s (%q)", name, s.Ref, typ, want)
		}
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		if s.Type != "string" || s.Format != "byte" {
			t.Errorf("%s: %s/%s, want string/byte (base64)", name, s.Type, s.Format)
		}
	case typ.Kind() == reflect.Slice:
		if s.Type != "array" || s.Items == nil {
			t.Errorf("%s: type %q, want array with items", name, s.Type)
			return
		}
		checkSchemaType(t, name+"[]", *s.Items, typ.Elem(), byType)
	case typ.Kind() == reflect.String:
		if s.Type != "string" {
			t.Errorf("%s: type %q, want string", name, s.Type)
		}
	case typ.Kind() == reflect.Bool:
		if s.Type != "boolean" {
			t.Errorf("%s: type %q, want boolean", name, s.Type)
		}
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64:
		if s.Type != "integer" {
			t.Errorf("%s: type %q, want integer", name, s.Type)
		}
	default:
		t.Errorf("%s: Go type %s has no JSON mapping in this test", name, typ)
	}
}

// POST /v1/producer-ids answers what its schema says.
func TestOpenAPIProducerID(t *testing.T) {
	s := newDocServer(t)
	rec := httptest.NewRecorder()
	c := s.echo.NewContext(httptest.NewRequest(http.MethodPost, "/v1/producer-ids", nil), rec)
	if err := s.producerID(c); err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	sc := loadOpenAPI(t).Components.Schemas["ProducerID"]
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(sc.Properties)); !slices.Equal(g, w) {
		t.Errorf("answer has %v, schema %v", g, w)
	}
	if rec.Code != http.StatusCreated {
		t.Errorf("status %d, the document says 201", rec.Code)
	}
}

// The document is served without credentials; the API itself still
// needs them.
func TestOpenAPIServedAnonymously(t *testing.T) {
	s := newDocServer(t)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content type %q", ct)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	body, _ := io.ReadAll(rec.Body)
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q, want 3.x", doc.OpenAPI)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/v1/producer-ids"},
		{http.MethodGet, "/v1/topics/t/partitions/0/messages?offset=0"},
		{http.MethodGet, "/v1/no-such-route"},
	} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials: %d, want 401", r.method, r.path, rec.Code)
		}
	}
}
