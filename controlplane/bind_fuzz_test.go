package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
)

// FuzzBind feeds arbitrary request bodies to the strict JSON decoder every
// /v1 handler reads its body with, into request types of several shapes
// (strings, numbers, maps, pointers, nested lists, times).
//
// Invariants:
//   - bind never panics;
//   - every rejection is a catalogued client error (4xx), never internal;
//   - an accepted body re-encodes to JSON that binds to the same value
//     (its encoding is a fixed point).
func FuzzBind(f *testing.F) {
	for _, s := range []string{
		`{"name":"orders","partitions":3,"config":{"retention.ms":"1000"}}`,
		`{"tenant_name":"acme","email":"a@b.c","password":"correct horse 1","plan":"free"}`,
		`{"principal":"*","resource_type":"topic","resource_name":"o","pattern_type":"prefixed","operation":"read","permission":"allow"}`,
		`{"description":"k","role":"viewer","expires_at":"2030-01-01T00:00:00Z"}`,
		`{"partitions":5,"config":{"retention.ms":null}}`,
		`{"produce_bytes_per_sec":1e3}`,
		`{"name":"a"} {"name":"b"}`,
		`{"name":"a","bogus":1}`,
		`{"partitions":"3"}`,
		`{"pool":"dedicated-1"}`,
		`[1,2]`, ``, `{`, `null`, `{"name":"\ud800"}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	s := &Server{cfg: Config{MaxBodyBytes: 4 << 10}}
	e := echo.New()
	targets := []func() any{
		func() any { return new(api.CreateTopicRequest) },
		func() any { return new(api.UpdateTopicRequest) },
		func() any { return new(api.SignupRequest) },
		func() any { return new(api.CreateACLRequest) },
		func() any { return new(api.CreateAPIKeyRequest) },
		func() any { return new(api.Quotas) },
		func() any { return new(api.MoveTenantRequest) },
	}
	bind := func(body []byte, v any) error {
		req := httptest.NewRequest(http.MethodPost, "/v1/x", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		return s.bind(e.NewContext(req, httptest.NewRecorder()), v)
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		mk := targets[int(which)%len(targets)]
		v := mk()
		err := bind(body, v)
		if err != nil {
			var ce *catalog.Error
			if !errors.As(err, &ce) || ce.Entry.HTTPStatus < 400 || ce.Entry.HTTPStatus >= 500 {
				t.Fatalf("body %q: rejection %v is not a catalogued client error", body, err)
			}
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode %T: %v", v, err)
		}
		w := mk()
		if err := bind(again, w); err != nil {
			t.Fatalf("body %q accepted, its re-encoding %s rejected: %v", body, again, err)
		}
		if third, _ := json.Marshal(w); !bytes.Equal(third, again) {
			t.Fatalf("body %q: bound %s, re-encoded and bound %s", body, again, third)
		}
	})
}
