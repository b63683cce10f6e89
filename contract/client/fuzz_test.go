package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/contract/wire"
)

// replay answers every request with one canned response: the bytes under
// test, as a misbehaving or damaged control plane (or proxy) would send.
type replay struct {
	status int
	body   []byte
}

func (r replay) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: r.status, Body: io.NopCloser(bytes.NewReader(r.body)), Header: http.Header{}, Request: req}, nil
}

// FuzzDecodeResponse feeds arbitrary response statuses and bodies to the
// client's decoder, as a broker reads the control plane's cell state.
//
// Invariants:
//   - Do never panics;
//   - a status of 300 or more (but 304) is an *Error with that status and
//     a non-empty code, whatever the body;
//   - a 2xx answer either decodes into the result or is an error that is
//     not an *Error (a decoding failure, not an API refusal).
func FuzzDecodeResponse(f *testing.F) {
	good, _ := json.Marshal(wire.CellState{Version: wire.Version, Cell: "c1", StateVersion: 3,
		Brokers: []wire.Broker{{ID: "b1", NodeID: 1}}})
	f.Add(uint16(200), good)
	f.Add(uint16(200), good[:len(good)-2])
	f.Add(uint16(304), []byte{})
	f.Add(uint16(404), []byte(`{"code":"not_found","message":"no such cell","retriable":false}`))
	f.Add(uint16(503), []byte(`<html>bad gateway</html>`))
	f.Add(uint16(429), []byte(`{"code":""}`))
	f.Add(uint16(200), []byte(`{"brokers":"many"}`))
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		st := 100 + int(status)%500
		c := New("http://control-plane.invalid", WithHTTPClient(&http.Client{Transport: replay{st, body}}))
		var out wire.CellState
		err := c.Do(context.Background(), http.MethodGet, "/internal/v1/cells/c1/state", nil, &out)
		var ae *Error
		switch {
		case st == http.StatusNotModified:
			if err != nil {
				t.Fatalf("304: %v", err)
			}
		case st >= 300:
			if !errors.As(err, &ae) || ae.Status != st || ae.Code == "" {
				t.Fatalf("status %d body %q: %v, want an *Error with that status and a code", st, body, err)
			}
		case err != nil && errors.As(err, &ae):
			t.Fatalf("status %d: decoding failure reported as an API error %v", st, err)
		}
	})
}
