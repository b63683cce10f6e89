// Package client is the Go client of the control plane's public /v1 API. The
// console, the Terraform provider and tenantd admin use it; they never reach
// into the control plane otherwise.
package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
)

// Error is a failed call: the HTTP status and the catalogue's code and
// message. Match on Code, never on Message.
type Error struct {
	Status    int
	Code      string
	Message   string
	Retriable bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message) }

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Client calls the API with one credential.
type Client struct {
	base   string
	auth   string
	header http.Header // extra headers of every request; never shared between copies
	hc     *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey authenticates with an API key (default: no credential).
func WithAPIKey(id, secret string) Option {
	return func(c *Client) {
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
	}
}

// WithSession authenticates with a session token (default: no credential).
func WithSession(token string) Option {
	return func(c *Client) { c.auth = "Bearer " + token }
}

// WithHeader sets a header on every request (default: none), e.g. the
// console's credential.ConsoleClientHeader.
func WithHeader(name, value string) Option {
	return func(c *Client) {
		h := c.header.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set(name, value)
		c.header = h
	}
}

// OnBehalfOf makes a client holding a cell key (WithAPIKey with the cell
// key) act for the named API key of a tenant of that cell, with exactly
// that key's permissions (api.OnBehalfOfHeader). Default: none.
func OnBehalfOf(keyID string) Option { return WithHeader(api.OnBehalfOfHeader, keyID) }

// WithHTTPClient sets the HTTP client (default: one with a 30 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8080).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// With returns a copy of c with more options, e.g. another credential.
func (c *Client) With(opts ...Option) *Client {
	cp := *c
	for _, o := range opts {
		o(&cp)
	}
	return &cp
}

// Do sends one request with an optional JSON body and decodes a JSON answer
// into out (when out is non-nil and the answer has a body).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("read %s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusNotModified {
		return nil // a long-poll that saw no change
	}
	if resp.StatusCode >= 300 {
		var e api.Error
		if json.Unmarshal(raw, &e) != nil || e.Code == "" {
			return &Error{Status: resp.StatusCode, Code: "http_" + fmt.Sprint(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
		}
		return &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message, Retriable: e.Retriable}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

func pageQuery(limit int, token string) string {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", fmt.Sprint(limit))
	}
	if token != "" {
		v.Set("page_token", token)
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// withQuery is path with the params that are not empty as its query, for
// the list calls whose filters are all optional.
func withQuery(path string, params map[string]string) string {
	q := url.Values{}
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// call makes one request and decodes the answer into a new T.
func call[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	return out, c.Do(ctx, method, path, body, &out)
}

// all follows next-page tokens to the end.
func all[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var out []T
	token := ""
	for {
		var p api.Page[T]
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		q := strings.TrimPrefix(pageQuery(0, token), "?")
		full := path
		if q != "" {
			full += sep + q
		}
		if err := c.Do(ctx, http.MethodGet, full, nil, &p); err != nil {
			return nil, err
		}
		out = append(out, p.Items...)
		if p.NextPageToken == "" {
			return out, nil
		}
		token = p.NextPageToken
	}
}

func esc(s string) string { return url.PathEscape(s) }
