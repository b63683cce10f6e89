package catalog

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadJSON(t *testing.T) {
	type req struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
		Value []byte `json:"value"`
	}
	cases := []struct {
		body, code, msg string
	}{
		{`{"name":"a","count":1,"value":"eA=="}`, "", ""},
		{``, "malformed_json", "empty"},
		{`{"name":`, "malformed_json", "middle of a JSON value"},
		{`{"name":"a"} {}`, "malformed_json", "exactly one JSON object"},
		{`{"name":"a",}`, "malformed_json", "invalid JSON at byte"},
		{`{"count":"3"}`, "invalid_request", `field "count" must be an integer, not string`},
		{`{"name":3}`, "invalid_request", `field "name" must be a string, not number`},
		{`[1]`, "invalid_request", "must be a JSON object, not array"},
		{`{"value":"!!"}`, "invalid_request", "not valid base64"},
		{`{"colour":1}`, "unknown_field", `unknown field "colour"`},
		{`{"name":"` + strings.Repeat("x", 64) + `"}`, "body_too_large", "larger than 48 bytes"},
	}
	for _, tc := range cases {
		var v req
		body := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(tc.body)), 48)
		_, err := ReadJSON(body, &v, 48)
		if tc.code == "" {
			if err != nil || v.Name != "a" || v.Count != 1 || string(v.Value) != "x" {
				t.Fatalf("%q: %+v, %v", tc.body, v, err)
			}
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) || string(ce.Entry.Code) != tc.code || !strings.Contains(ce.Message, tc.msg) {
			t.Fatalf("%q: got %v, want %s containing %q", tc.body, err, tc.code, tc.msg)
		}
	}
}
